"""A revoked token stops working at once, in every process (issue 33).

Tokens are cached per process for a few seconds. The admin's Revoke used to update the
rows only, so the token kept working until each process's cache expired; now every
revocation changes a shared mark (in the cache every process reads) and a process that
sees it changed reads its tokens again.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from sessionhub import authentication
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
    assert any(cached.pk == token.pk for _, cached in authentication._token_cache.values())

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
    team: Team, make_token: Any, client_for: Any
) -> None:
    token, raw = make_token(team)
    assert _ingest(client_for, raw, 1) == 200
    assert _ingest(client_for, raw, 2) == 200  # cached here
    # Another process revokes: the row changes and so does the shared mark; this
    # process's cache still holds the token as it was.
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    cache.set(authentication.REVOCATION_MARK, "revoked-elsewhere", timeout=None)
    assert _ingest(client_for, raw, 3) == 401
