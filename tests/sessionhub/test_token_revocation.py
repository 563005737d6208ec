"""A revoked token stops working at once, in every process (issue 33).

Tokens are cached per process for a few seconds. The admin's Revoke used to update the
rows only, so the token kept working until each process's cache expired; now every
revocation changes a shared mark (in the cache every process reads) and a process that
sees it changed reads its tokens again.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from sessionhub import authentication, revocations
from sessionhub.models import ApiToken, Team
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

EVENT = {"event_id": "rev-1", "kind": "prompt", "agent_id": "a", "session_id": "s", "text": "hi"}


def _ingest(client_for: Any, raw: str, n: int) -> int:
    body = {**EVENT, "event_id": f"rev-{n}"}
    return client_for(raw).post("/api/v1/events", body, format="json").status_code


def test_admin_revoke_refuses_the_token_on_the_next_request(
    team: Team, make_token: Any, client_for: Any, settings: Any
) -> None:
    assert settings.SESSIONHUB["TOKEN_CACHE_SECONDS"] > 0  # the cache is on
    token, raw = make_token(team)
    assert _ingest(client_for, raw, 1) == 200
    assert _ingest(client_for, raw, 2) == 200  # served from the process's cache now
    assert any(entry[-1].pk == token.pk for entry in authentication._token_cache.values())

    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    MembershipFactory(team=team, user=admin)
    browser = Client()
    browser.force_login(admin)
    answer = browser.post(
        "/admin/sessionhub/apitoken/",
        {"action": "revoke", "_selected_action": [str(token.pk)]},
    )
    assert answer.status_code == 302, answer.content[:500]
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None

    assert _ingest(client_for, raw, 3) == 401


def test_a_revocation_in_another_process_empties_this_ones_cache(
    team: Team, make_token: Any, client_for: Any, monkeypatch: Any
) -> None:
    """Without the watch (no Redis, or its connection lost), the shared mark tells."""
    monkeypatch.setattr(revocations.Watch, "news", lambda self: None)
    token, raw = make_token(team)
    assert _ingest(client_for, raw, 1) == 200
    assert _ingest(client_for, raw, 2) == 200  # cached here
    # Another process revokes: the row changes and so does the shared mark; this
    # process's cache still holds the token as it was.
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    cache.set(revocations.MARK, "revoked-elsewhere", timeout=None)
    assert _ingest(client_for, raw, 3) == 401


needs_redis = pytest.mark.skipif(not settings.REDIS_URL, reason="the watch listens on Redis")


def _publish_from_another_process(channel: str) -> None:
    """What another process's announcement sends, from a separate interpreter."""
    script = (
        "import redis, sys; "
        "print(redis.Redis.from_url(sys.argv[1]).publish(sys.argv[2], 'revoked'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, settings.REDIS_URL, channel],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert int(done.stdout) >= 1  # this process's watch was subscribed


@needs_redis
def test_the_watch_hears_another_process_without_a_round_trip_per_request(
    team: Team, make_token: Any, client_for: Any, monkeypatch: Any
) -> None:
    token, raw = make_token(team)
    assert _ingest(client_for, raw, 1) == 200
    mark_reads: list[Any] = []
    real_get = cache.get

    def counting_get(key: Any, *args: Any, **kwargs: Any) -> Any:
        if key == revocations.MARK:
            mark_reads.append(key)
        return real_get(key, *args, **kwargs)

    monkeypatch.setattr(cache, "get", counting_get)
    for n in range(2, 12):
        assert _ingest(client_for, raw, n) == 200
    watch = revocations._current_watch()
    assert watch is not None and watch.up
    assert mark_reads == []  # the cached token was trusted on the socket's silence

    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    _publish_from_another_process(revocations.channel())
    assert _ingest(client_for, raw, 12) == 401
    assert mark_reads == []


@needs_redis
def test_a_lost_watch_falls_back_to_the_mark_and_subscribes_again(
    team: Team, make_token: Any, client_for: Any, monkeypatch: Any
) -> None:
    import redis

    token, raw = make_token(team)
    assert _ingest(client_for, raw, 1) == 200
    assert _ingest(client_for, raw, 2) == 200
    watch = revocations._current_watch()
    assert watch is not None and watch.up
    # Redis drops every subscriber (a restart, a failover); meanwhile a revocation is
    # announced whose message nobody hears: only the mark changes.
    admin = redis.Redis.from_url(settings.REDIS_URL)
    assert admin.client_kill_filter(_type="pubsub") >= 1
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    cache.set(revocations.MARK, "revoked-while-nobody-listened", timeout=None)
    time.sleep(0.05)  # the connection's end reaches this process
    assert _ingest(client_for, raw, 3) == 401
    assert not watch.up

    # The watch comes back on the next request after its retry interval, and coming
    # back drops what was cached while it was away.
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=None)
    monkeypatch.setattr(revocations, "RETRY_SECONDS", 0.0)
    watch._retry_at = 0.0
    assert _ingest(client_for, raw, 4) == 200
    assert _ingest(client_for, raw, 5) == 200
    assert watch.up
