"""Test settings: PostgreSQL and Redis when they answer, SQLite and memory otherwise.

CI always has both on 127.0.0.1; a developer without them still gets a working suite, and
the pytest header says loudly which backends were used.
"""

from __future__ import annotations

import os
import socket


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-" + "x" * 40)
os.environ.setdefault("ALLOWED_HOSTS", "*")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")

FALLBACKS: list[str] = []
if "DATABASE_URL" not in os.environ:
    if _reachable("127.0.0.1", 5432):
        os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/sessionhub"
    else:
        FALLBACKS.append("PostgreSQL not reachable on 127.0.0.1:5432: using SQLite")
if "REDIS_URL" not in os.environ:
    if _reachable("127.0.0.1", 6379):
        os.environ["REDIS_URL"] = "redis://127.0.0.1:6379/15"
    else:
        FALLBACKS.append("Redis not reachable on 127.0.0.1:6379: using local memory")

from .settings import *  # noqa: E402, F403
from .settings import CACHES, DATABASES, REDIS_URL  # noqa: E402

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # An in-memory database by default; SESSIONHUB_TEST_SQLITE_FILE names a file instead,
    # as the embedded default runs (threads of the live-server tests then see real locking).
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("SESSIONHUB_TEST_SQLITE_FILE") or ":memory:"
    }
else:
    # One test database per run, so two suites on one machine never drop each other's.
    DATABASES["default"]["TEST"] = {"NAME": f"test_sessionhub_{os.getpid()}"}
DATABASES["default"]["CONN_MAX_AGE"] = 0

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Unit tests run tasks in-process; the worker tests start a real Celery worker on Redis.
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
if REDIS_URL:
    CACHES["default"]["KEY_PREFIX"] = f"test-{os.getpid()}"

REST_FRAMEWORK = {**REST_FRAMEWORK}  # noqa: F405
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {"token": "100000/min"}
