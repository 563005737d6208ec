"""How a session's last turn ended (memory.outcome): an intention is never a finished turn,
an API error is a failed one, a prompt nobody answered stopped."""

from __future__ import annotations

import pytest

from memory.outcome import FAILED, FINISHED, STOPPED, Outcome, judge_final, last_outcome


@pytest.mark.parametrize(
    "final",
    [
        "Signature checks are in.\n\nNow let me run the webhook suite.",
        "I've added the toggle. Let me now adapt the chart colours.",
        "The certificates are copied. I'll reload the proxy next.",
        "Next, I need to update the ORM models:",
        "已添加重试。接下来我会更新错误提示文案。",
        "次に通知の設定を確認します。",
    ],
)
def test_a_final_message_ending_on_an_intention_stopped(final: str) -> None:
    outcome = judge_final(final)
    assert outcome.state == STOPPED
    assert outcome.detail and outcome.detail in " ".join(final.split())


@pytest.mark.parametrize(
    "final",
    [
        "Fixed the race; all 41 tests pass.",
        "Done. Let me know if you want the docs too.",
        "Shall I start with the companies table?",
        "Android 12 でも一回だけ表示されます。",
        "",
    ],
)
def test_a_report_a_courtesy_or_a_question_finished(final: str) -> None:
    assert judge_final(final).state == FINISHED


def test_the_last_turn_decides() -> None:
    steps = [
        ("prompt", {"text": "a"}),
        ("turn", {"final_message": "Now let me check."}),
        ("prompt", {"text": "b"}),
        ("turn", {"final_message": "Checked: it works."}),
        ("end", {"final_message": "Checked: it works."}),
    ]
    assert last_outcome(steps) == Outcome(FINISHED, "")


def test_an_api_error_fails_the_turn_and_the_end_does_not_undo_it() -> None:
    steps = [
        ("prompt", {"text": "rotate"}),
        (
            "turn",
            {
                "failed": True,
                "error": "server_error",
                "error_type": "overloaded_error",
                "error_status": 529,
            },
        ),
        ("end", {"final_message": "Loaded the notes."}),
    ]
    assert last_outcome(steps) == Outcome(FAILED, "API error: overloaded (HTTP 529)")


def test_a_prompt_without_an_answer_stopped_unless_the_end_says_it_failed() -> None:
    assert last_outcome(
        [("prompt", {"text": "Check disk usage"}), ("end", {"final_message": "old words"})]
    ) == Outcome(STOPPED, "no answer to: Check disk usage")
    assert (
        last_outcome(
            [("prompt", {"text": "x"}), ("end", {"failed": True, "error": "api_error"})]
        ).state
        == FAILED
    )
    assert last_outcome([("prompt", {"text": "x"}), ("end", {"interrupted": True})]) == Outcome(
        STOPPED, "interrupted by the user"
    )


def test_a_subagents_end_is_no_turn_of_the_session() -> None:
    steps = [
        ("prompt", {"text": "audit"}),
        ("turn", {"final_message": "Started the audit in the background."}),
        ("turn", {"subagent": True, "final_message": "Now let me look at cron."}),
    ]
    assert last_outcome(steps).state == FINISHED
    assert last_outcome([]) == Outcome()
