"""What SessionHub remembers of real Claude Code sessions: the real CLI (npm, pinned) against
the Messages API mock, each session scripted the way real sessions go (``Step``), the hook
client installed as the docs say, one SessionHub server for the module.

- A task list left half done (TaskCreate/TaskUpdate, and TodoWrite of earlier releases):
  its open items are the session's pending tasks, nothing from the plan in the thinking.
- A turn that ends on an intention ("Now let me…") and one that an overloaded API ends:
  neither is filed as completed, and the next session hears how each ended.
- ``--resume`` and ``--continue`` land in the session they resume; a fork
  (``--fork-session``) follows the session it came from.

If the npm registry cannot be reached the tests fail, loudly.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from lifecycle.models import Session, SessionStatus
from memory.continuity.record import record_as_dict
from memory.models import ContinuityRecord, SessionFeatures, Summary
from tests.integrations.mock_anthropic import CLAUDE_CODE_VERSION, MockAnthropic, Step
from tests.integrations.node_runtime import npm_prefix
from tests.integrations.test_claude_code_real import Rig, summary_of, wait_for
from tests.integrations.test_hook_client_e2e import DevServer, free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PLAN = (
    "Plan:\n1. Read the API middleware\n2. Look for any issues or incomplete implementations\n"
    "3. Add the limiter\nTODO: check the proxy headers"
)


@pytest.fixture(scope="module")
def claude() -> Path:
    prefix = npm_prefix("claude-code", {"@anthropic-ai/claude-code": CLAUDE_CODE_VERSION})
    binary = prefix / "node_modules" / ".bin" / "claude"
    done = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0 or not done.stdout.startswith(CLAUDE_CODE_VERSION):
        pytest.fail(f"!!! claude-code {CLAUDE_CODE_VERSION} from npm does not run: {done!r} !!!")
    return binary


@pytest.fixture(scope="module")
def server(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One server for the module, on the test database (each test empties it after)."""
    if connection.vendor != "postgresql":
        pytest.fail(
            "!!! the real-CLI tests run a server process on the test database: PostgreSQL !!!"
        )
    dev = DevServer(free_port(), tmp_path_factory.mktemp("server") / "server.log")
    dev.start()
    try:
        yield dev
    finally:
        if dev.proc is not None:
            dev.proc.kill()
            dev.proc.wait(timeout=30)


@pytest.fixture
def rig(tmp_path: Path, claude: Path, server: DevServer, token: str) -> Iterator[Rig]:
    with MockAnthropic() as mock:
        yield Rig(tmp_path, claude, server, token, mock)


def task(subject: str) -> Step:
    return Step(
        tool="TaskCreate", input={"subject": subject, "description": subject, "activeForm": subject}
    )


def update(task_id: int, status: str) -> Step:
    return Step(tool="TaskUpdate", input={"taskId": str(task_id), "status": status})


def start_record(session_id: str) -> ContinuityRecord:
    return wait_for(
        f"the start record of {session_id}",
        lambda: ContinuityRecord.objects.filter(
            session__external_id=session_id, stage=ContinuityRecord.Stage.START
        ).first(),
    )


def features_of(session: Session) -> SessionFeatures:
    summary_of(session)  # the features are built before the summary
    return SessionFeatures.objects.get(session=session)


def test_a_task_list_left_half_done_and_a_turn_ending_on_an_intention(rig: Rig) -> None:
    rig.env["CLAUDE_CODE_ENABLE_TODO_TOOLS"] = "1"  # TaskCreate / TaskUpdate
    prompt = "Add rate limiting to the public API"
    rig.mock.script(
        prompt,
        [
            Step(
                think=PLAN,
                tool="TaskCreate",
                input={"subject": "Add the limiter middleware", "description": "limiter"},
            ),
            task("Return 429 with a Retry-After header"),
            task("Load-test the limiter"),
            update(1, "completed"),
            update(2, "in_progress"),
            Step(tool="Bash", input={"command": "echo '# TODO: tune the burst size'"}),
            Step(
                say="The limiter middleware is in place.\n\nNow let me run the load test "
                "against it."
            ),
        ],
    )
    rig.run(prompt)
    rig.settle()
    [first] = rig.session_ids()
    session = Session.objects.get(external_id=first)
    features = features_of(session)
    assert sorted(t["text"] for t in features.pending_tasks) == [
        "Load-test the limiter",
        "Return 429 with a Retry-After header",
    ]
    assert {t["source"] for t in features.pending_tasks} == {"task_list"}
    summary = Summary.objects.get(session=session)
    assert summary.outcome == "stopped"
    assert summary.outcome_detail == "Now let me run the load test against it."
    assert "Now let me" not in summary.completed
    assert "Add the limiter middleware" in summary.completed  # the list's closed item
    assert not {"activeform", "subject", "taskid", "status"} & set(features.hot_topics)

    # The task list of earlier releases (TodoWrite), in the next session, whose start hears
    # of the first one: how it stopped, what it left open, nothing of its plan.
    rig.env["CLAUDE_CODE_ENABLE_TASKS"] = "0"
    second_prompt = "Document the rate limits"
    rig.mock.script(
        second_prompt,
        [
            Step(
                tool="TodoWrite",
                input={
                    "todos": [
                        {
                            "content": "Write docs/limits.md",
                            "status": "completed",
                            "activeForm": "Writing docs/limits.md",
                        },
                        {
                            "content": "Add examples of 429 answers",
                            "status": "pending",
                            "activeForm": "Adding examples",
                        },
                    ]
                },
            ),
            Step(say="Documented the limits in docs/limits.md."),
        ],
    )
    rig.run(second_prompt)
    rig.settle()
    second = rig.session_ids()[1]
    preamble = start_record(second).preamble
    assert "stopped while: Now let me run the load test against it." in preamble
    assert "- Return 429 with a Retry-After header" in preamble
    assert "- Load-test the limiter" in preamble
    assert "completed: The limiter middleware is in place." in preamble
    for noise in ("incomplete implementations", "proxy headers", "burst size"):
        assert noise not in preamble
    later = features_of(Session.objects.get(external_id=second))
    assert [t["text"] for t in later.pending_tasks] == ["Add examples of 429 answers"]


def test_a_turn_that_an_overloaded_api_ends_failed(rig: Rig) -> None:
    rig.env["CLAUDE_CODE_MAX_RETRIES"] = "0"  # no minutes of retries
    prompt = "Rotate the signing keys"
    rig.mock.script(
        prompt,
        [Step(tool="Bash", input={"command": "echo rotating"}), Step(status=529)],
    )
    rig.run(prompt, ok=False)
    rig.settle()
    [failed] = rig.session_ids()
    session = Session.objects.get(external_id=failed)
    summary = summary_of(session)
    assert summary.outcome == "failed"
    assert "overloaded" in summary.outcome_detail.lower()
    assert "API Error" not in summary.completed and "529" not in summary.completed

    rig.run("What happened with the keys?")
    rig.settle()
    preamble = start_record(rig.session_ids()[1]).preamble
    assert "- failed: API error" in preamble
    assert "completed:" not in preamble


def test_resume_and_continue_land_in_the_session_and_a_fork_follows_it(rig: Rig) -> None:
    rig.run("Start on the nightly export job")
    rig.settle()
    [first] = rig.session_ids()
    rig.run("Resume the export job", "--resume", first)
    rig.run("Keep going with the export", "--continue")
    rig.settle()
    assert rig.session_ids() == [first]
    session = Session.objects.get(external_id=first)
    assert (session.status, session.suspend_count, session.prompt_count) == (
        SessionStatus.ENDED,
        2,
        3,
    )

    rig.run("Try the export with a streaming writer", "--resume", first, "--fork-session")
    rig.settle()
    fork_id = rig.session_ids()[1]
    fork = wait_for(
        "the fork linked to its origin",
        lambda: Session.objects.filter(external_id=fork_id, previous_session=session).first(),
    )
    assert fork.previous_external_id == first

    # A new session hears of the conversation's latest part: the fork.
    rig.run("Where is the export job?")
    rig.settle()
    record = start_record(rig.session_ids()[2])
    assert record_as_dict(record)["sources"][0]["external_id"] == fork_id
