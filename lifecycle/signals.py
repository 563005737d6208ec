"""What lifecycle announces to the apps built on it. It imports none of them: they connect.

* ``session_closed`` is sent inside the ingest transaction when a session stops being
  open (ended, crashed or reset), with ``session`` and ``ended_at``; a receiver's writes
  commit or roll back with the events that closed it.
* The task that distils a session's new events is registered by the app that owns it
  (the memory app, in its ``ready``); lifecycle queues it after commit and keeps the
  session marked until it has run, so with no task registered nothing is lost either.
* What a prompt's answer hands the agent (a manual continue waiting for its session's
  next prompt) comes from the function the memory app registers
  (``register_prompt_context``); the ingest view calls it for the prompts whose client
  says it reads the answer, and adds what it returns to the answer.
"""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

session_closed = Signal()

_session_task: Any = None


def register_session_task(task: Any) -> None:
    """Name the Celery task (taking one session id) that processes a session's events."""
    global _session_task
    _session_task = task


def session_task() -> Any:
    """The registered session task, or None when no app has registered one."""
    return _session_task


_prompt_context: Any = None


def register_prompt_context(provider: Any) -> None:
    """Name the function that, given session ids that just took a prompt, returns what to
    hand each of them (a list of answer entries, empty when nothing waits)."""
    global _prompt_context
    _prompt_context = provider


def prompt_context() -> Any:
    """The registered prompt-context function, or None."""
    return _prompt_context
