"""The open-work board in a real browser: every pending task of the team's recent
sessions, by project, with its source session, its age and whether a later session
finished it; another team's tasks never shown."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from lifecycle.models import Session
from memory.board import open_work
from sessionhub.models import Team
from sessionhub.services import team_get_or_create
from tests.dashboard.test_browser import browser, log_in, page, shot  # noqa: F401
from tests.factories import MembershipFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LEDGER = "/home/dev/src/ledger"
PORTAL = "/home/dev/src/portal"


def post_session(
    url: str, token: str, cwd: str, hours_ago: float, prompt: str, final: str, *, end: bool = True
) -> str:
    """A Claude Code session posted as the hook client posts it, ``hours_ago`` ago."""
    session_id = str(uuid.uuid4())
    start = datetime.now(UTC) - timedelta(hours=hours_ago + 1)
    hooks: list[dict[str, Any]] = [
        {"hook_event_name": "SessionStart", "source": "startup"},
        {"hook_event_name": "UserPromptSubmit", "prompt": prompt},
        {"hook_event_name": "Stop", "last_assistant_message": final},
    ]
    if end:
        hooks.append({"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"})
    body = [
        hook
        | {"session_id": session_id, "cwd": cwd, "transcript_path": "/nonexistent.jsonl"}
        | {
            "sessionhub": {
                "event_id": f"{session_id}-{i}",
                "occurred_at": (start + timedelta(minutes=20 * i)).isoformat(),
            }
        }
        for i, hook in enumerate(hooks)
    ]
    response = requests.post(
        f"{url}/api/v1/hooks/claude-code",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return session_id


def test_the_board_lists_open_work_by_project_with_what_a_later_session_finished(
    page: Any,  # noqa: F811 - the fixture
    live_server: Any,
    team: Team,
    make_token: Any,
) -> None:
    token = make_token(team)[1]
    url = live_server.url
    first = post_session(
        url,
        token,
        LEDGER,
        50,
        "Fix the refunds in the nightly ledger export",
        "Refunds are exported now. TODO: task-501 add the refund report. "
        "TODO: task-502 backfill the March ledger.",
    )
    post_session(
        url,
        token,
        LEDGER,
        20,
        "Add the refund report (task-501)",
        "task-501 done: the refund report is added to the export.",
    )
    post_session(
        url,
        token,
        PORTAL,
        3,
        "Renew the portal's TLS setup",
        "Renewed the certificates. TODO: rotate the staging certificates.",
        end=False,
    )
    other = team_get_or_create(slug="globex", name="Globex")
    post_session(url, make_token(other)[1], LEDGER, 2, "Theirs", "TODO: task-999 secret plans.")
    MembershipFactory(team=team, user=UserFactory(username="lead"))

    log_in(page, live_server, "lead", path="/board/")
    page.get_by_role("heading", name="Open work").wait_for()
    shot(page, "board-01")
    body = page.locator("main").inner_text()
    assert "task-999" not in body  # another team's

    ledger = page.locator("section.board-project", has_text="task-502")
    rows = ledger.locator("tr.task")
    assert rows.count() == 2
    open_row = ledger.locator("tr.task", has_text="task-502")
    assert open_row.get_attribute("data-state") == "open"
    assert "backfill the March ledger" in open_row.inner_text()
    assert "Fix the refunds" in open_row.inner_text()  # its source session, by its request
    assert "2 d" in open_row.inner_text()  # its age
    done_row = ledger.locator("tr.task", has_text="task-501")
    assert done_row.get_attribute("data-state") == "finished"
    assert "finished by Add the refund report" in " ".join(done_row.inner_text().split())

    portal = page.locator("section.board-project", has_text="rotate the staging certificates")
    assert portal.locator("tr.task").get_attribute("data-state") == "in progress"

    # The source session's link opens it.
    open_row.get_by_role("link", name="Fix the refunds").click()
    page.wait_for_url(f"**/sessions/{Session.objects.get(external_id=first).pk}/")

    # The same board from the selector: one query whatever the number of sessions.
    projects = open_work(team)
    assert sum(p.open_count for p in projects) == 2
