"""The distil loop: a session's memory brought up to date with its events, going round
again while events keep arriving (``pipeline.session_round`` is one round)."""

from __future__ import annotations

from lifecycle.models import OPEN_STATUSES

from .. import pipeline


def session_process_until_clean(
    session_id: str, rounds: int = 10, *, settle_open: bool = False
) -> pipeline.Round | None:
    """Process a session, going round again while events keep arriving; the last round
    (what still waits after it), or None when there is no such session.

    Ingestion queues work only when a session turns dirty, so the run that is busy with
    a session must also pick up what came in meanwhile (a newer outbox mark). Past
    ``rounds`` the mark stays set and the outbox sweep takes over.

    With ``settle_open``, a session that is still open gets one round: a busy agent's
    events keep coming, and going round at once would keep a core busy with a few events
    a round. The caller queues the next run a moment later instead, which then takes in
    everything that arrived meanwhile. A closed session goes round until clean: its
    summary is wanted now.
    """
    last = None
    for _ in range(rounds):
        last = pipeline.session_round(session_id)
        if last is None or last.waiting is None:
            return last
        if settle_open and last.waiting in OPEN_STATUSES:
            return last
    return last
