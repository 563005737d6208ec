"""gunicorn settings for SessionHub (read automatically from the working directory).

Ingestion is short requests that mostly wait on PostgreSQL: a few processes with a few
threads each keep the cores busy while requests wait on the database. Override with
GUNICORN_WORKERS / GUNICORN_THREADS (and the lock hand-over of ``post_worker_init`` with
GUNICORN_SWITCH_INTERVAL, in seconds).
"""

import gc
import multiprocessing
import os
import sys
from typing import Any

from gunicorn.glogging import Logger

from sessionhub.text.redaction import redact_identifier

# Web processes only publish to the broker (after commit, a few bytes): a hung Redis
# must not hold a request for the worker's 2 s. Read by the settings in each worker.
os.environ.setdefault("BROKER_CONNECT_TIMEOUT", "0.25")
os.environ.setdefault("BROKER_SOCKET_TIMEOUT", "0.25")

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count() + 1))
threads = int(os.environ.get("GUNICORN_THREADS", 4))
worker_class = "gthread" if threads > 1 else "sync"
keepalive = 30
timeout = 30
graceful_timeout = 20
# Recycle workers now and then so no leak can grow without bound.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", 50_000))
max_requests_jitter = 5_000
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
# The request line without its query string, as nginx logs it: a query string may carry
# what nobody should log (a token in ?session_key=..., a dashboard search). The path is
# redacted (a client may paste a token where an id goes).
access_log_format = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(M)sms'


class PathOnlyLogger(Logger):
    """gunicorn's logger with every atom that could hold a query string (the raw request
    line, the query, the referer, the raw URI of the environ) cut to its path, whatever
    ``access_log_format`` a deployment sets, and the path redacted."""

    def atoms(self, resp: Any, req: Any, environ: Any, request_time: Any) -> dict[str, Any]:
        atoms = super().atoms(resp, req, environ, request_time)
        path = redact_identifier(environ.get("PATH_INFO", ""))
        atoms["U"] = path
        atoms["r"] = f"{environ.get('REQUEST_METHOD')} {path} {environ.get('SERVER_PROTOCOL')}"
        atoms["q"] = ""
        atoms["f"] = str(atoms.get("f", "-")).split("?", 1)[0]
        for key in ("{raw_uri}e", "{http_referer}e", "{referer}i"):
            if key in atoms:
                atoms[key] = str(atoms[key]).split("?", 1)[0]
        if "{query_string}e" in atoms:
            atoms["{query_string}e"] = ""
        return atoms


logger_class = PathOnlyLogger


def post_worker_init(worker: object) -> None:
    """Once the application is loaded in a worker: its objects never need collecting, so
    the collector stops walking them (fewer and shorter pauses mid-request), and a thread
    that waits for the interpreter lock gets it sooner than the 5 ms default."""
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(float(os.environ.get("GUNICORN_SWITCH_INTERVAL", "0.001")))
