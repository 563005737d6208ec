"""A refused token loses nothing: the real Claude Code hook client against a live server.

With a token the server refuses (401) every hook exits 0 in silence and its event waits
in the spool; ``status`` asks the server and says the token is refused; the tokens page
counts the refusals. Once the token is fixed the next hook (or ``flush``) delivers them,
in order, each stored once. The spool stays bounded while the token is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lifecycle.models import LifecycleEvent
from sessionhub.models import Team
from sessionhub.refusals import refusals_fold
from tests.integrations.test_hook_client_e2e import (
    HookClient,
    Scenario,
    assert_no_duplicates,
    check_scenario,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _wrong(raw: str) -> str:
    """The same token's prefix with a wrong secret (a mistyped paste)."""
    return raw[:-6] + ("AAAAAA" if not raw.endswith("AAAAAA") else "BBBBBB")


def test_a_refused_token_keeps_the_events_and_the_fixed_one_delivers_them(
    live_server: Any, team: Team, make_token: Any, tmp_path: Path
) -> None:
    token, raw = make_token(team, name="laptop")
    client = HookClient(tmp_path, live_server.url, _wrong(raw))
    scenario = Scenario("basic", tmp_path / "transcripts")
    last = len(scenario.lines) - 1

    for index in range(last):
        done = client.run(scenario.hook(index))
        assert (done.stdout, done.stderr) == ("", ""), "the client must stay silent"
        assert len(client.spooled()) == index + 1, client.log()
    assert LifecycleEvent.objects.count() == 0
    assert "token refused" in client.log() or "token is refused" in client.log()
    kept = [e["sessionhub"]["event_id"] for e in client.spooled()]
    assert len(set(kept)) == last

    status = client.run(None, "status").stdout
    assert "TOKEN REFUSED (HTTP 401" in status, status
    assert f"({last} event(s) waiting" in status

    # Every hook made one request (the spool, refused at once) and status one more.
    refusals_fold([token])
    assert token.refused_count == last + 1
    assert token.last_refused_status == 401

    # The token is fixed: status says so, and the last hook sends the spool, then itself.
    client.env["SESSIONHUB_TOKEN"] = raw
    status = client.run(None, "status").stdout
    assert "server:  ok: token laptop (ingest, read) of team acme [Acme]" in status, status
    assert client.hook(scenario.hook(last)) == ""
    assert client.spooled() == []
    assert client.run(None, "flush").stdout.strip() == "sent 0, waiting 0: done"

    assert LifecycleEvent.objects.count() == len(scenario.lines)
    assert set(kept) <= set(LifecycleEvent.objects.values_list("event_id", flat=True))
    assert_no_duplicates()
    check_scenario(scenario)
    token.refresh_from_db()
    assert token.last_event_at is not None


def test_the_spool_stays_bounded_while_the_token_is_refused(
    live_server: Any, team: Team, make_token: Any, tmp_path: Path
) -> None:
    _, raw = make_token(team)
    client = HookClient(tmp_path, live_server.url, _wrong(raw))
    client.env["SESSIONHUB_SPOOL_MAX_EVENTS"] = "3"
    scenario = Scenario("basic", tmp_path / "transcripts")
    sent = [scenario.hook(i) for i in range(6)]
    for hook in sent:
        client.run(hook)
    kept = client.spooled()
    assert len(kept) == 3
    # The newest three: the oldest went first.
    assert [e["hook_event_name"] for e in kept] == [h["hook_event_name"] for h in sent[3:]]
    assert "dropped the" in client.log()
    assert json.loads(client.spool.read_text().splitlines()[0])["sessionhub"]["event_id"]
    assert "at most 3 kept" in client.run(None, "status").stdout


def test_status_with_no_server_says_so(tmp_path: Path) -> None:
    client = HookClient(tmp_path, "http://127.0.0.1:9", "shub_0000aaaa_secret", timeout=1.0)
    status = client.run(None, "status").stdout
    assert "server:  not reachable" in status, status
