# ruff: noqa: RUF001 - Chinese and Japanese text uses its own punctuation
"""Pending tasks, keywords and topics of a session (memory.features): the session's own task
list first, explicit markers only where the user or the final message wrote them, content
words only, CJK text too."""

from __future__ import annotations

from memory import features as f


def pending(sources: list[tuple[str, str]], changes: list[dict] | None = None) -> list[str]:
    tasks, _ = f.task_states(sources, f.task_list_state(changes or []))
    return [t.text for t in tasks]


# --- the task list ---------------------------------------------------------------------


def test_todowrite_keeps_its_last_list_open_items_pending_done_items_gone() -> None:
    changes = [
        {
            "op": "replace",
            "items": [{"text": "A", "status": "pending"}, {"text": "B", "status": "pending"}],
        },
        {
            "op": "replace",
            "items": [
                {"text": "A", "status": "completed"},
                {"text": "B", "status": "in_progress"},
                {"text": "C", "status": "pending"},
            ],
        },
    ]
    state = f.task_list_state(changes)
    assert [(t.text, t.open) for t in state] == [("A", False), ("B", True), ("C", True)]
    assert pending([], changes) == ["B", "C"]


def test_task_create_and_update_follow_the_ids_the_tool_answered() -> None:
    changes = [
        {"op": "create", "id": "1", "text": "Write the parser", "status": "pending"},
        {"op": "create", "id": "2", "text": "Add the tests", "status": "pending"},
        {"op": "create", "id": "3", "text": "Drop the old path", "status": "pending"},
        {"op": "update", "id": "1", "status": "completed"},
        {"op": "update", "id": "2", "status": "in_progress", "text": "Add the parser tests"},
        {"op": "update", "id": "3", "status": "deleted"},
    ]
    assert pending([], changes) == ["Add the parser tests"]


def test_a_task_created_without_an_id_is_numbered_in_order() -> None:
    changes = [
        {"op": "create", "id": "", "text": "One", "status": "pending"},
        {"op": "create", "id": "", "text": "Two", "status": "pending"},
        {"op": "update", "id": "2", "status": "completed"},
    ]
    assert pending([], changes) == ["One"]


# --- explicit markers --------------------------------------------------------------------


def test_markers_count_in_prompts_and_final_messages_but_never_a_plan_step() -> None:
    final = (
        "Here is the plan:\n1. Read the handler\n2. Look for any issues or incomplete "
        "implementations\n3. Fix it in progress\nNext: add the replay metric."
    )
    assert pending([("prompt", "TODO: rotate the staging key"), ("final_message", final)]) == [
        "TODO: rotate the staging key",
        "add the replay metric.",
    ]


def test_a_todo_in_pasted_code_or_a_log_is_the_codes_not_a_task() -> None:
    prompt = (
        "Why does this fail?\n```python\n# TODO: remove the fallback\nload()\n```\n"
        "    // TODO: not mine either\n2026-03-02T09:14:07Z ERROR TODO: from a log line"
    )
    assert pending([("prompt", prompt)]) == []


def test_a_marker_naming_a_list_item_is_that_item_and_a_closed_item_closes_it() -> None:
    changes = [
        {
            "op": "replace",
            "items": [
                {"text": "Add a screenshot to the PR description", "status": "pending"},
                {"text": "Write the migration", "status": "completed"},
            ],
        }
    ]
    final = "Next: add a screenshot to the PR description. TODO: write the migration."
    assert pending([("final_message", final)], changes) == [
        "Add a screenshot to the PR description"
    ]


def test_a_later_report_closes_a_marked_task() -> None:
    sources = [
        ("final_message", "Remaining: backfill the partition statistics."),
        ("final_message", "Backfilled the partition statistics since January."),
    ]
    assert pending(sources) == []


def test_a_report_in_other_words_closes_a_step_that_names_a_file() -> None:
    """A step handed on, asked for in the next prompt and reported done in other words:
    the file's name read as words, "mention the change" and "updated" both a kind of
    work."""
    sources = [
        ("final_message", "The fix is in. Next step: mention the change in RELEASE_NOTES.md."),
        ("prompt", "Add it to the release notes and push the branch."),
        ("final_message", "Release notes updated and fix/apns-unregistered pushed to origin."),
    ]
    assert pending(sources) == []
    # The kind of work alone never closes a step about something else.
    sources[2] = ("final_message", "Changes added to the changelog and pushed.")
    assert pending(sources) == ["mention the change in RELEASE_NOTES.md."]
    # Nor does one of the two things a step is about, with a kind of work...
    step = ("final_message", "Remaining: document the webhook setup.")
    report = ("final_message", "Added Stripe webhook signature checks to the endpoint.")
    assert pending([step, report]) == ["document the webhook setup."]
    # ... nor the things it is about without any: two of four words are not enough.
    step = ("final_message", "Remaining: add a metric for replayed events.")
    report = ("final_message", "Replayed events now get a 200 with the stored result.")
    assert pending([step, report]) == ["add a metric for replayed events."]


def test_task_ids_still_open_and_close() -> None:
    tasks, done = f.task_states(
        [("prompt", "TODO: task-7 ship it"), ("final_message", "task-7 done.")]
    )
    assert tasks == [] and done == {"task-7"}


# --- keywords and topics -----------------------------------------------------------------


def test_keywords_are_content_words_never_identifiers() -> None:
    words = f.keywords(
        ["Fix the DatePicker request_id=7f3a9c2e bpxrficyzx9a4t2qe7 4f35e220-c435-4cf7 python3"]
    )
    assert set(words) == {"fix", "datepicker", "python3"}


def test_chinese_and_japanese_give_keywords() -> None:
    assert {"登录", "超时", "重试"} <= set(
        f.keywords(["修复登录页面在弱网络下的超时问题，并添加重试机制"])
    )
    japanese = f.keywords(["プッシュ通知の許可ダイアログが二回表示される不具合を直してください"])
    assert {"プッシュ", "通知", "許可", "ダイアログ"} <= set(japanese)
    assert "的" not in "".join(f.keywords(["我的登录的问题"]))


def test_a_cjk_pair_is_a_topic_only_when_two_texts_say_it() -> None:
    topics = f.hot_topics(["修复登录超时", "登录不再超时"])
    assert "登录" in topics and "超时" in topics
    assert "复登" not in topics


def test_tool_words_are_values_never_keys_states_or_file_contents() -> None:
    todos = {"todos": [{"content": "Add the legend", "status": "pending", "activeForm": "Adding"}]}
    assert f.tool_words(todos) == "Add the legend"
    assert f.tool_words({"taskId": "3", "status": "completed"}) == ""
    assert (
        f.tool_words({"file_path": "src/chart.tsx", "content": "const secretThing = 1"})
        == "src/chart.tsx"
    )
    assert not {"activeform", "todos", "status", "content", "taskid"} & set(
        f.keywords([f.tool_words(todos)])
    )
