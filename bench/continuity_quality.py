"""Continuity quality: does the preamble come from the right session, say what it must,
and never say what it must not?

Each scenario builds a small history only through the public API — canonical events
(``/api/v1/events``), Claude Code hook bodies (``/api/v1/hooks/claude-code``) or OpenClaw
plugin calls (``/api/v1/hooks/openclaw``) — and then asks for continuity the way the
real client does:

- Claude Code (the hook client): ``SessionStart`` posted, continuity asked with the start
  event; the first ``UserPromptSubmit`` posted, continuity asked with the prompt and the
  event. What the agent sees is both preambles.
- OpenClaw (the plugin): ``session_start`` and ``message_received`` posted, continuity
  asked at ``before_prompt_build`` with ``agent_id``, ``session_id``, ``session_key`` and
  the prompt.
- the generic API: a canonical start, then continuity with the prompt.

Every scenario states the session that should be the top source (or none) and facts the
preamble must and must not contain; a must-not fact has a category: another project,
another team, a secret, finished work shown as to-do, or other noise. Most scenarios are
templates run once per gateway; a few only make sense for one gateway.

Printed per gateway: precision@1 of the source choice, recall of the required facts,
leaks by category, preamble size in tokens (characters / 4, rounded up: the usual rule
of thumb; no tokenizer is installed), and continuity latency (in process, through the
whole Django/DRF stack, without the network).

Run: ``.venv/bin/python bench/continuity_quality.py`` (PostgreSQL when it answers on
127.0.0.1:5432, else SQLite; a throwaway database). ``--sqlite`` forces SQLite. The test
suite runs a subset of the scenarios (``tests/memory/test_continuity_quality.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import string
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CHANNELS = ("claude-code", "openclaw", "generic")
CATEGORIES = ("project", "team", "secret", "finished", "noise")
TOKEN_LIMIT = 250
MARKER_WORDS = {"redacted", "aws_access_key", "github_token", "password_assignment"}

# A poster: (path, body, token) -> (status, json answer, seconds).
Poster = Callable[[str, Any, str], tuple[int, Any, float]]


@dataclass
class Prior:
    """A prior session of a scenario."""

    name: str
    hours_ago: float
    prompts: list[str]
    final: str = ""
    reasoning: str = ""
    project: str = "main"
    team: str = "A"
    end: bool = True
    pin: tuple[str, str] | None = None  # (label, content) pinned during the session
    turns: list[tuple[str, str]] = field(default_factory=list)  # extra (reasoning, final)
    interruption: str = ""  # "compact" (Claude Code) or "restart" (OpenClaw) midway


@dataclass
class Scenario:
    """A history, a new session's first prompt, and what its preamble must be."""

    slug: str
    priors: list[Prior]
    prompt: str
    expected: str | None  # the prior's name, or None: no preamble at all
    must: list[str] = field(default_factory=list)
    must_not: list[tuple[str, str]] = field(default_factory=list)  # (category, text)
    project: str = "main"
    channels: tuple[str, ...] = CHANNELS
    secrets: list[str] = field(default_factory=list)


def _letters(n: int) -> str:
    """A digit-free suffix (digits in paths are their own scenario)."""
    out = ""
    n += 26
    while n:
        n, r = divmod(n, 26)
        out = string.ascii_lowercase[r] + out
    return out


AWS = "AKIAYS7BUZSBKMUIV3NR"
GHP = "ghp_76dEyTzAeKOmXRrvftva9AW7hipTgadDZFlR"
PASSWORD = "Vq8#mZt2!pLr9xW"


def scenarios() -> list[Scenario]:
    """The held-out set: written before looking at what the scorer does with them."""
    s: list[Scenario] = []
    add = s.append
    add(
        Scenario(
            "pending-simple",
            [
                Prior(
                    "p",
                    3,
                    ["Add retries to the payment webhook consumer"],
                    final="Retries added with exponential backoff. "
                    "TODO: task-4101 alert when the dead-letter queue grows.",
                )
            ],
            "keep going on the webhook consumer",
            "p",
            must=["task-4101", "dead-letter"],
        )
    )
    add(
        Scenario(
            "old-relevant-beats-fresh",
            [
                Prior(
                    "ws",
                    6 * 24,
                    ["Fix the websocket reconnect backoff in the notifier"],
                    final="Reconnect backoff now has jitter. Next: cover the heartbeat timeout.",
                ),
                Prior(
                    "css",
                    1,
                    ["Polish the pricing page styles"],
                    final="Pricing page spacing fixed. TODO: task-4201 dark mode colours.",
                ),
            ],
            "the notifier websocket drops again after reconnecting, look at the backoff",
            "ws",
            must=["heartbeat timeout"],
            must_not=[("noise", "task-4201")],
        )
    )
    add(
        Scenario(
            "old-relevant-beats-fresh-with-pending",
            [
                Prior(
                    "search",
                    5 * 24,
                    ["Tune the product search ranking: boost exact SKU matches"],
                    final="Exact SKU matches are boosted. Next: tune synonyms for colour names.",
                ),
                Prior(
                    "ops",
                    2,
                    ["Rotate the staging database credentials"],
                    final="Staging credentials rotated. TODO: task-4301 update the runbook. "
                    "TODO: task-4302 notify the on-call channel.",
                ),
            ],
            "search ranking: colour synonyms are still off",
            "search",
            must=["synonyms"],
            must_not=[("noise", "task-4301")],
        )
    )
    add(
        Scenario(
            "finished-in-a-later-session",
            [
                Prior(
                    "draft",
                    30,
                    ["Migrate the invoices table to the new schema"],
                    final="Schema drafted. TODO: task-4401 backfill the invoices archive.",
                ),
                Prior(
                    "finish",
                    5,
                    ["Finish the invoices migration"],
                    final="Backfilled the invoices archive; task-4401 done and merged.",
                ),
            ],
            "what is left on the invoices migration?",
            "finish",
            must=["task-4401 done"],
            must_not=[("finished", "[task-4401]"), ("finished", "TODO: task-4401")],
        )
    )
    add(
        Scenario(
            "finished-in-the-same-session",
            [
                Prior(
                    "release",
                    4,
                    ["Prepare the release notes for the exporter"],
                    turns=[
                        ("The exporter works. Remaining: update the changelog.", "Tests pass."),
                    ],
                    final="Changelog updated and PR #148 opened.",
                )
            ],
            "exporter release: anything left?",
            "release",
            must=["Changelog updated"],
            must_not=[("finished", "Remaining: update the changelog")],
        )
    )
    add(
        Scenario(
            "task-done-at-the-end-of-the-session",
            [
                Prior(
                    "audit",
                    8,
                    ["Audit the permission checks in the admin views"],
                    reasoning="TODO: task-4601 check the bulk delete action.",
                    final="Bulk delete is guarded too; task-4601 done. All admin views audited.",
                )
            ],
            "admin permission audit follow-up",
            "audit",
            must=["admin views audited"],
            must_not=[("finished", "[task-4601]"), ("finished", "TODO: task-4601")],
        )
    )
    add(
        Scenario(
            "finished-note-later",
            [
                Prior(
                    "plan",
                    2 * 24,
                    ["Plan the feature-flag rollout"],
                    final="Plan agreed. Next: write the rollout runbook for the flags.",
                ),
                Prior(
                    "done",
                    20,
                    ["Rollout runbook"],
                    final="Rollout runbook for the flags written and reviewed.",
                ),
            ],
            "feature flag rollout: where are we?",
            "done",
            must=["runbook"],
            must_not=[("finished", "write the rollout runbook")],
        )
    )
    add(
        Scenario(
            "two-projects",
            [
                Prior(
                    "other",
                    2,
                    ["Speed up the image resizer"],
                    final="Resizer uses a pool. TODO: task-4801 cache thumbnails.",
                    project="imaging",
                ),
                Prior(
                    "mine",
                    2 * 24,
                    ["Add pagination to the orders API"],
                    final="Cursor pagination added. TODO: task-4802 document the cursor format.",
                ),
            ],
            "continue the orders API work",
            "mine",
            must=["task-4802"],
            must_not=[("project", "task-4801"), ("project", "imaging")],
        )
    )
    add(
        Scenario(
            "cold-start-in-a-new-project",
            [
                Prior(
                    "elsewhere",
                    1,
                    ["Refactor the billing reports"],
                    final="Reports refactored. TODO: task-4901 remove the old endpoint.",
                    project="billing",
                )
            ],
            "set up the linting config",
            None,
            project="fresh",
            must_not=[("project", "task-4901"), ("project", "billing")],
        )
    )
    add(
        Scenario(
            "other-team-same-project",
            [
                Prior(
                    "theirs",
                    1,
                    ["Harden the login rate limiter"],
                    final="Rate limiter hardened. TODO: task-5001 add captcha after five fails.",
                    team="B",
                ),
                Prior(
                    "ours",
                    3 * 24,
                    ["Harden the login form validation"],
                    final="Validation hardened. Next: add tests for unicode e-mail addresses.",
                ),
            ],
            "login hardening, next steps",
            "ours",
            must=["unicode"],
            must_not=[("team", "task-5001"), ("team", "captcha")],
        )
    )
    add(
        Scenario(
            "secrets-in-the-prior-session",
            [
                Prior(
                    "deploy",
                    3,
                    [
                        f"Deploy with AWS key {AWS} and password={PASSWORD} to the canary",
                        f"the CI token is {GHP}",
                    ],
                    final="Canary deployed. TODO: task-5101 promote the canary to production.",
                )
            ],
            f"promote the canary, the key is {AWS}",
            "deploy",
            must=["task-5101"],
            must_not=[
                ("secret", AWS),
                ("secret", PASSWORD),
                ("secret", GHP),
            ],
            secrets=[AWS, PASSWORD, GHP],
        )
    )
    add(
        Scenario(
            "outside-the-lookback",
            [
                Prior(
                    "ancient",
                    9 * 24,
                    ["Rewrite the cron scheduler"],
                    final="Scheduler rewritten. TODO: task-5201 drop the legacy cron table.",
                )
            ],
            "the cron scheduler again",
            None,
            must_not=[("noise", "task-5201")],
        )
    )
    add(
        Scenario(
            "middle-one-is-relevant",
            [
                Prior(
                    "a",
                    5 * 24,
                    ["Profile the PDF renderer memory use"],
                    final="Renderer memory halved.",
                ),
                Prior(
                    "b",
                    2 * 24,
                    ["Add SAML single sign-on for enterprise tenants"],
                    final="SAML login works with Okta. Next: support IdP-initiated login.",
                ),
                Prior(
                    "c",
                    3,
                    ["Bump the frontend dependencies"],
                    final="Dependencies bumped, tests green.",
                ),
            ],
            "SAML: IdP initiated login for enterprise tenants",
            "b",
            must=["IdP-initiated"],
        )
    )
    add(
        Scenario(
            "plain-continue-takes-the-newest",
            [
                Prior(
                    "older",
                    2 * 24,
                    ["Write the data retention job"],
                    final="Retention job written.",
                ),
                Prior(
                    "newest",
                    5,
                    ["Add metrics to the retention job"],
                    final="Metrics exported. Next: add an alert on deleted rows per day.",
                ),
            ],
            "continue where we left off",
            "newest",
            must=["alert on deleted rows"],
        )
    )
    add(
        Scenario(
            "pending-pin-survives-the-end",
            [
                Prior(
                    "keys",
                    6,
                    ["Rework the token signing"],
                    final="Signing moved to the new key service.",
                    pin=("task-5501 rotate the signing keys", "three of six keys rotated"),
                )
            ],
            "token signing follow-up",
            "keys",
            must=["task-5501"],
        )
    )
    add(
        Scenario(
            "morphology",
            [
                Prior(
                    "migr",
                    4 * 24,
                    ["Migrate the user settings to the new storage"],
                    final="Settings migrated for half of the users. Next: migrate the rest.",
                ),
                Prior(
                    "misc",
                    2,
                    ["Fix typos in the onboarding emails"],
                    final="Typos fixed.",
                ),
            ],
            "the settings migration for the remaining users",
            "migr",
            must=["migrate the rest"],
        )
    )
    add(
        Scenario(
            "digits-in-paths-under-a-token",
            [
                Prior(
                    "web3",
                    1,
                    ["Wire the wallet connect button"],
                    final="Wallet button wired. TODO: task-5701 handle chain switch.",
                    project="web3-app",
                ),
                Prior(
                    "apiv2",
                    2 * 24,
                    ["Version the public API under /v2"],
                    final="v2 routes added. TODO: task-5702 deprecate the v1 routes.",
                    project="api-v2",
                ),
            ],
            "continue the v2 API versioning",
            "apiv2",
            project="api-v2",
            must=["task-5702"],
            must_not=[("project", "task-5701"), ("project", "web3-app")],
        )
    )
    add(
        Scenario(
            "same-word-different-intent",
            [
                Prior(
                    "catalogue",
                    4 * 24,
                    ["Add a Redis cache for the product catalogue"],
                    final="Catalogue cached. Next: invalidate entries on price changes.",
                ),
                Prior(
                    "cdn",
                    2,
                    ["Remove the stale cache headers from the CDN config"],
                    final="Stale headers removed from the CDN config.",
                ),
            ],
            "catalogue cache invalidation when prices change",
            "catalogue",
            must=["invalidate entries on price changes"],
        )
    )
    add(
        Scenario(
            "whats-pending-across-sessions",
            [
                Prior(
                    "first",
                    3 * 24,
                    ["Split the monolith's notification module"],
                    final="Module split. TODO: task-6101 move the e-mail sender. "
                    "TODO: task-6102 move the SMS sender.",
                ),
                Prior(
                    "second",
                    24,
                    ["Carry on with the notification split"],
                    final="E-mail sender moved; task-6101 merged. "
                    "TODO: task-6103 delete the old notification tables.",
                ),
            ],
            "what is still pending?",
            "second",
            must=["task-6103", "task-6102"],
            must_not=[("finished", "[task-6101]"), ("finished", "TODO: task-6101")],
        )
    )
    add(
        Scenario(
            "same-words-in-another-project",
            [
                Prior(
                    "api-upgrade",
                    1,
                    ["Upgrade Django to 5.2 in the API service"],
                    final="Django upgraded. TODO: task-6201 fix the deprecated URL patterns.",
                    project="apiservice",
                ),
                Prior(
                    "worker-ci",
                    4 * 24,
                    ["Set up CI for the worker"],
                    final="CI runs on every push.",
                ),
            ],
            "upgrade Django to 5.2 here as well",
            None,
            must_not=[("project", "task-6201"), ("project", "apiservice")],
        )
    )
    add(
        Scenario(
            "empty-newer-session",
            [
                Prior(
                    "work",
                    2,
                    ["Add CSV export to the audit log"],
                    final="CSV export added. TODO: task-6301 stream large exports.",
                ),
                Prior("empty", 1, []),
            ],
            "audit log export: large files",
            "work",
            must=["task-6301"],
        )
    )
    add(
        Scenario(
            "secret-in-the-new-prompt",
            [
                Prior(
                    "hooks",
                    5,
                    ["Verify the GitHub webhook signatures"],
                    final="Signatures verified with HMAC. Next: reject replays older than "
                    "five minutes.",
                )
            ],
            f"webhook signatures: replays. my token is {GHP} and password={PASSWORD}",
            "hooks",
            must=["reject replays"],
            must_not=[("secret", GHP), ("secret", PASSWORD)],
            secrets=[GHP, PASSWORD],
        )
    )
    add(
        Scenario(
            "upper-case-prompt-old-session",
            [
                Prior(
                    "sig",
                    5 * 24,
                    ["Webhook signature verification for Stripe events"],
                    final="Stripe signatures checked. Next: rotate the signing secret monthly.",
                ),
                Prior(
                    "docs",
                    1,
                    ["Proofread the onboarding guide"],
                    final="Guide proofread. TODO: task-6501 add screenshots.",
                ),
            ],
            "STRIPE WEBHOOK SIGNATURE ROTATION",
            "sig",
            must=["rotate the signing secret"],
        )
    )
    # Gateway-specific shapes.
    add(
        Scenario(
            "after-clear",
            [
                Prior(
                    "before-clear",
                    0.2,
                    ["Investigate the flaky checkout test"],
                    final="The flake is a race in the cart fixture. "
                    "TODO: task-5801 make the cart fixture deterministic.",
                )
            ],
            "fix the cart fixture race",
            "before-clear",
            must=["task-5801"],
            channels=("claude-code",),
        )
    )
    add(
        Scenario(
            "compacted-session",
            [
                Prior(
                    "long",
                    9,
                    ["Port the reporting queries to the warehouse", "also the weekly rollups"],
                    final="Queries ported; weekly rollups pending. "
                    "TODO: task-6001 port the weekly rollups.",
                    interruption="compact",
                ),
                Prior("short", 1, ["Fix a typo in the README"], final="Typo fixed."),
            ],
            "warehouse port: the weekly rollups",
            "long",
            must=["task-6001"],
            channels=("claude-code",),
        )
    )
    add(
        Scenario(
            "openclaw-restarted-session",
            [
                Prior(
                    "restarted",
                    7,
                    ["Summarise the support tickets about refunds"],
                    final="Refund tickets grouped in four themes. "
                    "TODO: task-5901 draft replies for the late-refund theme.",
                    interruption="restart",
                )
            ],
            "draft the late refund replies",
            "restarted",
            must=["task-5901"],
            channels=("openclaw",),
        )
    )
    return s


# --- building histories through the public API -----------------------------------------


class World:
    """One run's teams, tokens, clock and ids; posts through ``post``."""

    def __init__(self, post: Poster, tokens: dict[str, str]) -> None:
        self.post = post
        self.tokens = tokens
        self.now = datetime.now(UTC)
        self.counter = 0

    def eid(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def send(self, path: str, body: Any, team: str = "A") -> Any:
        status, answer, _ = self.post(path, body, self.tokens[team])
        if status != 200:
            raise RuntimeError(f"{path}: {status} {answer}")
        results = answer.get("results", []) if isinstance(answer, dict) else []
        bad = [r for r in results if r.get("status") == "rejected"]
        if bad:
            raise RuntimeError(f"{path}: rejected {bad}")
        return answer


def _path(slug: str, project: str) -> str:
    if project in ("web3-app", "api-v2"):
        return f"/home/alice/src/{project}"  # digits on purpose
    return f"/home/alice/src/{project}-{slug}"


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def post_prior(world: World, channel: str, sc: Scenario, prior: Prior, sid: str) -> None:
    """One prior session through the channel's own ingest endpoint."""
    start = world.now - timedelta(hours=prior.hours_ago + 1)
    cwd = _path(sc.slug, prior.project)
    steps: list[tuple[str, dict[str, Any]]] = [("start", {})]
    steps += [("prompt", {"text": p}) for p in prior.prompts]
    if prior.interruption == "compact" and channel == "claude-code":
        steps += [("precompact", {}), ("compacted", {})]
    if prior.interruption == "restart" and channel == "openclaw":
        steps += [("suspend", {}), ("start", {})]
    steps += [("turn", {"reasoning": r, "final": f}) for r, f in prior.turns]
    if prior.final or prior.reasoning:
        steps.append(("turn", {"reasoning": prior.reasoning, "final": prior.final}))
    ends = [("end", {})] if prior.end else []
    moments = [start + timedelta(minutes=5 * i) for i in range(len(steps) + len(ends))]
    agent = f"agent-{sc.slug}-{prior.project}"
    key = f"agent:{agent}:main:{sid}"
    bodies = [
        _body(world, channel, kind, data, sid, cwd, agent, key, at)
        for (kind, data), at in zip(steps + ends, moments, strict=True)
    ]
    if prior.pin is None:
        world.send(_endpoint(channel), bodies, prior.team)
        return
    # Pinned during the session (before its end): through the agents API.
    head, tail = bodies[: len(steps)], bodies[len(steps) :]
    answer = world.send(_endpoint(channel), head, prior.team)
    session_pk = answer["results"][0]["session_id"]
    _, detail, _ = world.post_get(f"/api/v1/sessions/{session_pk}", prior.team)
    agent_pk = detail["agent"]["id"]
    label, content = prior.pin
    status, pin, _ = world.post(
        f"/api/v1/agents/{agent_pk}/pins",
        {"label": label, "content": content, "origin_session": session_pk},
        world.tokens[prior.team],
    )
    if status != 201:
        raise RuntimeError(f"pin: {status} {pin}")
    if tail:
        world.send(_endpoint(channel), tail, prior.team)


def _endpoint(channel: str) -> str:
    return {
        "claude-code": "/api/v1/hooks/claude-code",
        "openclaw": "/api/v1/hooks/openclaw",
        "generic": "/api/v1/events",
    }[channel]


def _body(
    world: World,
    channel: str,
    kind: str,
    data: dict[str, Any],
    sid: str,
    cwd: str,
    agent: str,
    key: str,
    at: datetime,
) -> dict[str, Any]:
    eid = world.eid(sid)
    if channel == "claude-code":
        hook = {
            "start": {"hook_event_name": "SessionStart", "source": "startup"},
            "prompt": {"hook_event_name": "UserPromptSubmit", "prompt": data.get("text", "")},
            "turn": {"hook_event_name": "Stop", "last_assistant_message": data.get("final", "")},
            "end": {"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"},
            "precompact": {"hook_event_name": "PreCompact", "trigger": "auto"},
            "compacted": {"hook_event_name": "SessionStart", "source": "compact"},
        }[kind]
        extra: dict[str, Any] = {"event_id": eid, "occurred_at": _iso(at)}
        if kind == "turn" and data.get("reasoning"):
            extra["reasoning_tail"] = data["reasoning"]
        return hook | {
            "session_id": sid,
            "cwd": cwd,
            "transcript_path": f"/home/alice/.claude/projects/x/{sid}.jsonl",
            "permission_mode": "default",
            "sessionhub": extra,
        }
    if channel == "openclaw":
        ctx = {
            "agentId": agent,
            "sessionId": sid,
            "sessionKey": key,
            "workspaceDir": cwd,
            "channelId": "discord",
        }
        ts = int(at.timestamp() * 1000)
        if kind == "start":
            return {"hook": "session_start", "event": {"sessionId": sid}, "ctx": ctx, "ts": ts} | {
                "eventId": eid
            }
        if kind == "prompt":
            event = {"from": "alice", "content": data["text"], "metadata": {}}
            return {
                "hook": "message_received",
                "event": event,
                "ctx": ctx,
                "ts": ts,
                "eventId": eid,
            }
        if kind == "turn":
            blocks = []
            if data.get("reasoning"):
                blocks.append({"type": "thinking", "thinking": data["reasoning"]})
            blocks.append({"type": "text", "text": data.get("final", "")})
            event = {
                "messages": [{"role": "assistant", "content": blocks}],
                "success": True,
                "durationMs": 1200,
            }
            return {"hook": "agent_end", "event": event, "ctx": ctx, "ts": ts, "eventId": eid}
        reason = "restart" if kind == "suspend" else "new"
        event = {"sessionId": sid, "reason": reason, "messageCount": 4}
        return {"hook": "session_end", "event": event, "ctx": ctx, "ts": ts, "eventId": eid}
    base = {"event_id": eid, "agent_id": agent, "session_id": sid, "occurred_at": _iso(at)}
    if kind == "start":
        return base | {"kind": "session_start", "cwd": cwd}
    if kind == "prompt":
        return base | {"kind": "prompt", "text": data["text"]}
    if kind == "turn":
        return base | {
            "kind": "turn_end",
            "final_message": data.get("final", ""),
            "reasoning": data.get("reasoning", ""),
        }
    return base | {"kind": "session_end", "reason": "new"}


@dataclass
class Outcome:
    """What one scenario gave on one gateway."""

    slug: str
    channel: str
    expected: str | None
    top: str | None
    seen: str
    must_found: int
    must_total: int
    leaks: dict[str, list[str]]
    latencies: list[float]
    preamble_tokens: list[int]
    answers: list[Any]


def run_scenario(world: World, sc: Scenario, channel: str) -> Outcome:
    """Build the scenario's history, start a new session, ask as the client asks."""
    ids = {p.name: f"{sc.slug}-{p.name}-{channel}" for p in sc.priors}
    for prior in sorted(sc.priors, key=lambda p: -p.hours_ago):
        post_prior(world, channel, sc, prior, ids[prior.name])
    sid = f"{sc.slug}-new-{channel}"
    cwd = _path(sc.slug, sc.project)
    agent = f"agent-{sc.slug}-{sc.project}"
    key = f"agent:{agent}:main:{sid}"
    at = world.now - timedelta(seconds=30)
    start = _body(world, channel, "start", {}, sid, cwd, agent, key, at)
    prompt_event = _body(
        world,
        channel,
        "prompt",
        {"text": sc.prompt},
        sid,
        cwd,
        agent,
        key,
        at + timedelta(seconds=5),
    )
    if channel == "claude-code" and sc.slug == "after-clear":
        start["source"] = "clear"
    answers, latencies = [], []

    def ask(body: dict[str, Any]) -> dict[str, Any]:
        status, answer, seconds = world.post("/api/v1/continuity", body, world.tokens["A"])
        if status != 200:
            raise RuntimeError(f"continuity: {status} {answer}")
        answers.append(answer)
        latencies.append(seconds)
        return answer

    endpoint = _endpoint(channel)
    if channel == "claude-code":
        world.send(endpoint, [start])
        first = ask({"source": "claude-code", "session_id": sid, "event": start})
        world.send(endpoint, [prompt_event])
        final = ask(
            {"source": "claude-code", "session_id": sid, "prompt": sc.prompt, "event": prompt_event}
        )
        seen = "\n".join(a["preamble"] for a in (first, final) if a["preamble"])
    elif channel == "openclaw":
        world.send(endpoint, [start, prompt_event])
        final = ask(
            {
                "source": "openclaw",
                "agent_id": agent,
                "session_id": sid,
                "session_key": key,
                "prompt": sc.prompt,
            }
        )
        seen = final["preamble"]
    else:
        world.send(endpoint, [start])
        final = ask({"source": "generic", "session_id": sid, "prompt": sc.prompt})
        seen = final["preamble"]
    names = {v: k for k, v in ids.items()}
    top = names.get(final["sources"][0]["external_id"], "?") if final["sources"] else None
    lowered = seen.lower()
    must_found = sum(1 for fact in sc.must if fact.lower() in lowered)
    leaks: dict[str, list[str]] = defaultdict(list)
    for category, text in sc.must_not:
        if text.lower() in lowered:
            leaks[category].append(text)
    # Redaction markers may be quoted ("asked: ... [REDACTED:aws_access_key]") but are
    # never what the work was about.
    for line in seen.splitlines():
        if line.startswith("HOT TOPICS:"):
            topics = {t.strip() for t in line.split(":", 1)[1].split(",")}
            for marker in topics & MARKER_WORDS:
                leaks["noise"].append(f"hot topic {marker}")
    served = json.dumps(answers).lower()
    for secret in sc.secrets:
        if secret.lower() in served and secret not in leaks["secret"]:
            leaks["secret"].append(secret)
    tokens = [math.ceil(len(a["preamble"]) / 4) for a in answers if a["preamble"]]
    return Outcome(
        sc.slug,
        channel,
        sc.expected,
        top,
        seen,
        must_found,
        len(sc.must),
        dict(leaks),
        latencies,
        tokens,
        answers,
    )


def table(outcomes: list[Outcome]) -> str:
    """The figures per gateway, as a Markdown table."""
    lines = [
        "| gateway | scenarios | precision@1 | fact recall | leaks: project / team / secret / "
        "finished (noise) | preamble tokens max (mean) | continuity latency p50 / max ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for channel in (*CHANNELS, "all"):
        rows = [o for o in outcomes if channel in ("all", o.channel)]
        if not rows:
            continue
        right = sum(1 for o in rows if o.top == o.expected)
        found = sum(o.must_found for o in rows)
        total = sum(o.must_total for o in rows) or 1
        counts = {c: sum(len(o.leaks.get(c, [])) for o in rows) for c in CATEGORIES}
        tokens = [t for o in rows for t in o.preamble_tokens] or [0]
        latency = [s * 1000 for o in rows for s in o.latencies] or [0.0]
        lines.append(
            f"| {channel} | {len(rows)} | {right / len(rows):.2f} ({right}/{len(rows)}) | "
            f"{found / total:.2f} ({found}/{total}) | "
            f"{counts['project']} / {counts['team']} / {counts['secret']} / "
            f"{counts['finished']} ({counts['noise']}) | "
            f"{max(tokens)} ({statistics.mean(tokens):.0f}) | "
            f"{statistics.median(latency):.1f} / {max(latency):.1f} |"
        )
    return "\n".join(lines)


def misses(outcomes: list[Outcome]) -> list[str]:
    """One line per scenario that went wrong, and how."""
    out = []
    for o in outcomes:
        problems = []
        if o.top != o.expected:
            problems.append(f"top {o.top!r}, expected {o.expected!r}")
        if o.must_found < o.must_total:
            problems.append(f"facts {o.must_found}/{o.must_total}")
        if o.leaks:
            problems.append(f"leaks {o.leaks}")
        if any(t > TOKEN_LIMIT for t in o.preamble_tokens):
            problems.append(f"tokens {o.preamble_tokens}")
        if problems:
            out.append(f"{o.channel:11} {o.slug}: " + "; ".join(problems))
    return out


def run_all(
    post: Poster, get: Callable[..., Any], tokens: dict[str, str], only: set[str] | None = None
) -> list[Outcome]:
    world = World(post, tokens)
    world.post_get = get  # type: ignore[attr-defined]
    outcomes = []
    for sc in scenarios():
        if only and sc.slug not in only:
            continue
        for channel in sc.channels:
            outcomes.append(run_scenario(world, sc, channel))
    return outcomes


def many_candidates(post: Poster, token: str, count: int, asks: int = 20) -> list[float]:
    """Latency with ``count`` candidates for one agent, each with open tasks and a summary
    that reports results (the newer sessions' reports are checked against every older
    session's tasks): seconds per continuity request with a prompt."""
    now = datetime.now(UTC)
    events: list[dict[str, Any]] = []
    for i in range(count):
        sid, at = f"many-{i}", now - timedelta(hours=150 * (count - i) / count + 1)
        base = {"agent_id": "many", "session_id": sid}
        words = ["ledger", "export", "cache", "queue", "schema", "oauth", "billing", "search"]
        topic = f"{words[i % 8]} {words[(i * 3) % 8]}"
        events += [
            base | {"event_id": f"{sid}-0", "kind": "session_start", "occurred_at": at.isoformat()},
            base
            | {
                "event_id": f"{sid}-1",
                "kind": "prompt",
                "text": f"Work on the {topic} module",
                "occurred_at": (at + timedelta(minutes=1)).isoformat(),
            },
            base
            | {
                "event_id": f"{sid}-2",
                "kind": "turn_end",
                "final_message": f"The {topic} tests were fixed and merged. "
                f"TODO: task-{9000 + i} tidy the {topic} docs. TODO: update the {topic} changelog.",
                "occurred_at": (at + timedelta(minutes=2)).isoformat(),
            },
            base
            | {
                "event_id": f"{sid}-3",
                "kind": "session_end",
                "reason": "new",
                "occurred_at": (at + timedelta(minutes=3)).isoformat(),
            },
        ]
    for start in range(0, len(events), 400):
        status, answer, _ = post("/api/v1/events", events[start : start + 400], token)
        if status != 200:
            raise RuntimeError(f"{status} {answer}")
    seconds = []
    for i in range(asks):
        sid = f"many-new-{i}"
        start = {
            "event_id": f"{sid}-0",
            "kind": "session_start",
            "agent_id": "many",
            "session_id": sid,
            "occurred_at": now.isoformat(),
        }
        status, answer, took = post(
            "/api/v1/continuity",
            {"source": "generic", "session_id": sid, "prompt": "ledger cache docs", "event": start},
            token,
        )
        if status != 200:
            raise RuntimeError(f"{status} {answer}")
        seconds.append(took)
    return seconds


# --- running it on its own -------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqlite", action="store_true", help="use SQLite, not PostgreSQL")
    parser.add_argument("--only", help="comma-separated scenario slugs")
    parser.add_argument("--verbose", action="store_true", help="print every preamble")
    parser.add_argument(
        "--candidates",
        type=int,
        default=200,
        help="also time continuity with this many candidates for one agent (0: skip)",
    )
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo))
    if args.sqlite:
        os.environ["DATABASE_URL"] = "sqlite:///:memory:"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessionhub.settings_test")
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases
    from rest_framework.test import APIClient

    from sessionhub.services import api_token_create, team_get_or_create

    setup_test_environment()
    config = setup_databases(verbosity=0, interactive=False)
    try:
        team_a = team_get_or_create(slug="first", name="First")
        team_b = team_get_or_create(slug="second", name="Second")
        tokens = {
            # Named as `create_api_token TEAM` and `make run` name them: `*-token`.
            "A": api_token_create(team=team_a, name="first-token", scopes=["ingest", "read"])[1],
            "B": api_token_create(team=team_b, name="second-token", scopes=["ingest", "read"])[1],
        }
        client = APIClient()

        def post(path: str, body: Any, token: str) -> tuple[int, Any, float]:
            started = time.perf_counter()
            response = client.post(path, body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}")
            return response.status_code, response.json(), time.perf_counter() - started

        def get(path: str, team: str) -> tuple[int, Any, float]:
            started = time.perf_counter()
            response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {tokens[team]}")
            return response.status_code, response.json(), time.perf_counter() - started

        only = set(args.only.split(",")) if args.only else None
        outcomes = run_all(post, get, tokens, only)
        print(f"database: {connection.vendor}; {len(scenarios())} scenario templates")
        print(table(outcomes))
        for line in misses(outcomes):
            print("MISS", line)
        if args.candidates:
            took = sorted(x * 1000 for x in many_candidates(post, tokens["A"], args.candidates))
            print(
                f"continuity with {args.candidates} candidates (prompt, carried event): "
                f"p50 {statistics.median(took):.1f} ms, max {took[-1]:.1f} ms over {len(took)}"
            )
        if args.verbose:
            for o in outcomes:
                print(f"\n--- {o.channel} {o.slug} (top {o.top})\n{o.seen}")
    finally:
        teardown_databases(config, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
