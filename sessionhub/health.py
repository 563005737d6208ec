"""``/healthz``: is the database there, is the broker there."""

from __future__ import annotations

import time

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .resilience import breaker_for, redis_timeouts


def _check_database() -> dict[str, object]:
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "down"
        return {"ok": False, "error": exc.__class__.__name__}
    return {"ok": True, "vendor": connection.vendor, "ms": _ms(started)}


def _check_broker() -> dict[str, object]:
    if not settings.REDIS_URL:
        return {"ok": True, "mode": "in-process (no broker configured)"}
    # A Redis known to be away is reported at once: the probe needs no timeout of its own.
    breaker = breaker_for(settings.REDIS_URL)
    if not breaker.available:
        return {"ok": False, "error": "unavailable"}
    started = time.perf_counter()
    client = redis.Redis.from_url(settings.REDIS_URL, **redis_timeouts())
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        breaker.failed(exc)
        return {"ok": False, "error": exc.__class__.__name__}
    finally:
        client.close()
    return {"ok": True, "mode": "redis", "ms": _ms(started)}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when both answer, 503 otherwise; says which one failed."""
    checks = {"database": _check_database(), "broker": _check_broker()}
    healthy = all(check["ok"] for check in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "degraded", "checks": checks},
        status=200 if healthy else 503,
    )
