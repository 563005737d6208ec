"""No piece of a secret anywhere (issue 15 "What it must show", issue 12 item 0).

Every format of the secrets corpus (``tests/fixtures/secrets.jsonl``), a format twin of
each (the same format, fresh random characters) and the recall corpus of the redaction
tests (Azure, SendGrid, Stripe restricted keys and the rest) go through every field of
every ingest endpoint: identifiers (event, session, agent ids, session keys, hook names,
resumed-from and next ids), JSON object keys, working directories, git remotes (with
credentials and with ``Authorization:`` headers), strings longer than the trim limit with
the secret across the cut, reasoning tails that the hook client cut inside an assignment, and
continuity requests. Then no 12-character piece of any secret, in any letter case, may be
found in the database (every row of every table), in any answer of the API (the ingest
answers included), in an export, in the dashboard's HTML or in the logs.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import logging
import os
import random
import string
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from lifecycle.adapters.base import MAX_STORED_STRING
from lifecycle.models import Agent, Session
from memory import pipeline
from sessionhub.text.redaction import redact_text
from tests.conftest import secret_cases
from tests.factories import MembershipFactory, UserFactory
from tests.memory.test_redaction import RECALL

from .test_secrets_end_to_end import database_rows, strings_in

REPO = Path(__file__).resolve().parents[2]
PIECE = 12  # characters: the length of a piece of a secret that must never be found
_rng = random.Random(20261123)


# --- the cases ----------------------------------------------------------------------------

# Literal parts of formats that a twin keeps (everything else is drawn afresh).
_FIXED = ("github_pat_", "sk-ant-api03-", "sk-proj-", "sk_live_", "rk_live_", "xoxb-", "eyJ")
_FIXED += ("AKIA", "ASIA", "AIza", "ghp_", "gho_", "ghs_", "xoxp-", "T3BlbkFJ")
_FIXED += ("sk-",)  # after the longer sk- prefixes, which are tried first


def _fresh(char: str) -> str:
    for alphabet in (string.ascii_uppercase, string.ascii_lowercase, string.digits):
        if char in alphabet:
            return _rng.choice(alphabet)
    return char  # punctuation is part of the format


def twin_of(secret: str) -> str:
    """The same format with fresh characters: fixed literals and punctuation kept."""
    out: list[str] = []
    i = 0
    while i < len(secret):
        fixed = next((f for f in _FIXED if secret.startswith(f, i)), None)
        if fixed:
            out.append(fixed)
            i += len(fixed)
        else:
            out.append(_fresh(secret[i]))
            i += 1
    return "".join(out)


def _basic(user: str) -> str:
    password = "".join(_rng.choice(string.ascii_letters + string.digits) for _ in range(18))
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def build_cases() -> list[tuple[str, list[str]]]:
    """(text, secrets) for every format: the corpus, its twins, the recall corpus, and
    remotes carrying credentials or Authorization headers."""
    cases: list[tuple[str, list[str]]] = []
    for case in secret_cases():
        if not case["secrets"]:
            continue
        cases.append((case["text"], list(case["secrets"])))
        text, twins = case["text"], []
        for secret in case["secrets"]:
            twin = twin_of(secret)
            text = text.replace(secret, twin)
            twins.append(twin)
        cases.append((text, twins))
    cases += [(text, list(secrets)) for text, secrets, _keep in RECALL if secrets]
    for user in ("deploy", "ci"):
        basic = _basic(user)
        cases.append((f"Authorization: Basic {basic}", [basic]))
        cases.append((f"http.extraheader=AUTHORIZATION: basic {basic}", [basic]))
    return cases


CASES = build_cases()[: int(os.environ.get("SECRETS_EVERYWHERE_CASES", "100000"))]
SECRETS = sorted({s for _text, secrets in CASES for s in secrets})


def identifier_forms(secret: str) -> list[str]:
    """Identifier-shaped strings (no whitespace) holding ``secret`` in a form redaction
    can recognise: the bare secret when its format names itself, else an assignment."""
    forms = [secret, f"password={secret}"]
    usable = [f for f in forms if not any(c.isspace() for c in f) and len(f) <= 200]
    return [f for f in usable if not _pieces_in(redact_text(f), [secret])][:1]


# How many windows of a text are looked up at once.
_WINDOW_CHUNK = 1_000_000


def _pieces(secret: str) -> set[str]:
    lowered = secret.lower()
    return {lowered[i : i + PIECE] for i in range(len(lowered) - PIECE + 1)}


def _pieces_in(text: str, secrets: list[str]) -> list[str]:
    lowered = text.lower()
    return [p for s in secrets for p in _pieces(s) if p in lowered]


def long_with_secret_across_the_cut(text: str, secret: str) -> str:
    """``text`` placed so that ``secret`` starts a few characters before the trim limit."""
    at = text.index(secret)
    pad = MAX_STORED_STRING - 6 - at
    words = ("lorem ipsum dolor sit amet " * (pad // 27 + 1))[:pad]
    return words + text


def fit(text: str, limit: int) -> str:
    """``text`` for a field that takes at most ``limit`` characters, else nothing: a
    client that cut it there would send a secret's head, which no rule can know."""
    return text if len(text) <= limit else ""


def _load_hook_client() -> Any:
    path = REPO / "integrations" / "claude-code" / "sessionhub_hook.py"
    spec = importlib.util.spec_from_file_location("sessionhub_hook_for_secrets", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


HOOK_CLIENT = _load_hook_client()


def reasoning_tails_cut_inside(text: str, secret: str) -> list[str]:
    """What the hook client sends as the reasoning tail (its TAIL_CHARS cut) of thinking
    whose last paragraph holds ``text``, for cuts falling on each side of and inside the
    assignment or context that makes the secret recognisable."""
    limit = HOOK_CLIENT.TAIL_CHARS
    earlier = "I checked the configuration and kept going with the deploy. " * 40
    head = f"{earlier}\n\n{earlier}\n\nNow the settings. {text}"
    at = head.index(secret)
    tails = []
    for back in (3, 6, 9, 12, 20, 30, 60):  # the cut, characters before the secret
        after = limit - back - (len(head) - at)  # what must follow for the cut to land
        padding = (" Then I ran the tests again." * (after // 28 + 1))[:after] if after > 0 else ""
        thought = head + padding
        tail = HOOK_CLIENT.tail_at_word_boundary(thought, limit)
        assert len(tail) < len(thought)  # it was cut
        tails.append(tail)
    return [t for t in tails if t]


# --- what each endpoint is sent -----------------------------------------------------------

_BASE = timezone.now() - timedelta(hours=3)


def _time(n: int) -> str:
    return (_BASE + timedelta(seconds=n)).isoformat()


def _ms(n: int) -> int:
    return int((_BASE + timedelta(seconds=n)).timestamp() * 1000)


def canonical_events(i: int, text: str, secret: str, ident: str | None) -> list[dict[str, Any]]:
    base = {"agent_id": "canonical-agent", "session_id": "canonical-session"}
    events: list[dict[str, Any]] = [
        {
            **base,
            "event_id": f"ev-{i}-text",
            "kind": "prompt",
            "text": text,
            "channel": fit(text, 100),
            "model": fit(text, 200),
            "tool_name": fit(text, 200),
            "occurred_at": _time(10 * i + 1),
            "payload": {"note": text, text: "a key", "nested": [{text: {"v": text}}]},
        },
        {
            **base,
            "event_id": f"ev-{i}-long",
            "kind": "turn_end",
            "final_message": long_with_secret_across_the_cut(text, secret),
            "reasoning": long_with_secret_across_the_cut(text, secret),
            "occurred_at": _time(10 * i + 2),
            "payload": {"out": long_with_secret_across_the_cut(text, secret)},
        },
        {
            "event_id": f"ev-{i}-where",
            "kind": "session_start",
            "agent_id": f"where-{i}",
            "agent_name": fit(text, 300),
            "session_id": f"where-{i}",
            "cwd": fit(text, 1000),
            "git_remote": fit(text, 1000),
            "occurred_at": _time(10 * i + 3),
        },
        {
            "event_id": f"ev-{i}-project",
            "kind": "session_start",
            "agent_id": f"project-{i}",
            "session_id": f"project-{i}",
            "project": fit(text, 500),
            "occurred_at": _time(10 * i + 4),
        },
    ]
    if ident:
        events += [
            {
                "event_id": ident,
                "kind": "session_start",
                "agent_id": ident,
                "session_id": ident,
                "session_key": ident,
                "previous_session_id": ident,
                "occurred_at": _time(10 * i + 5),
            },
            {
                "event_id": f"ev-{i}-end:{ident}",
                "kind": "session_end",
                "agent_id": ident,
                "session_id": ident,
                "next_session_id": ident,
                "reason": fit(text, 100),
                "occurred_at": _time(10 * i + 6),
            },
        ]
    return events


CC_SESSION = "7f3e1c2a-9b8d-4e6f-a5c4-3b2a1f0e9d87"
CC_CWD = "/home/dev/src/everywhere"


def claude_code_events(i: int, text: str, secret: str, ident: str | None) -> list[dict[str, Any]]:
    def line(n: int, hook: str, session: str = CC_SESSION, **fields: Any) -> dict[str, Any]:
        extra = {"event_id": f"cc-{i}-{n}", "occurred_at": _time(10 * i + n)}
        extra.update(fields.pop("sessionhub", {}))
        return {
            "session_id": session,
            "transcript_path": "/home/dev/.claude/projects/x/transcript.jsonl",
            "cwd": CC_CWD,
            "permission_mode": "default",
            "hook_event_name": hook,
            **fields,
            "sessionhub": extra,
        }

    tails = reasoning_tails_cut_inside(text, secret)
    lines = [
        line(1, "UserPromptSubmit", prompt=text),
        line(
            2,
            "PostToolUse",
            tool_name="Bash",
            tool_input={"command": text, text: text},
            tool_response={"stdout": long_with_secret_across_the_cut(text, secret)},
        ),
        line(
            3,
            "Stop",
            last_assistant_message=text,
            sessionhub={"final_message": text, "reasoning_tail": "\n".join(tails) or text},
        ),
        line(4, "Notification", message=text, model=fit(text, 200), **{text: "a key"}),
        # where the agent lives: the working directory and the git remote
        line(
            5,
            "SessionStart",
            session=f"cc-where-{i}",
            source="startup",
            cwd=fit(text, 1000),
        ),
        line(
            6,
            "SessionStart",
            session=f"cc-remote-{i}",
            source="startup",
            sessionhub={"git_remote": fit(text, 1000)},
        ),
        line(
            7,
            "SessionStart",
            session=f"cc-remote-cwd-{i}",
            source="startup",
            cwd=f"/home/dev/ {fit(text, 900)} /api-v2",
            sessionhub={"git_remote": f"https://github.com/acme/api-v2.git {fit(text, 900)}"},
        ),
    ]
    for n, tail in enumerate(tails):
        lines.append(
            line(20 + n, "Stop", last_assistant_message="ok", sessionhub={"reasoning_tail": tail})
        )
    if ident:
        lines += [
            line(
                8, "SessionStart", session=ident, source="startup", sessionhub={"event_id": ident}
            ),
            line(9, ident if len(ident) <= 100 else "LongHookName", session=ident),
        ]
    return lines


OC_SESSION = "2c9d8e7f-6a5b-4c3d-9e2f-1a0b9c8d7e6f"
OC_KEY = "vault:discord:channel:987654321"
OC_CTX = {
    "agentId": "vault",
    "sessionId": OC_SESSION,
    "sessionKey": OC_KEY,
    "workspaceDir": "/home/claw/.openclaw/workspace-vault",
    "channelId": "discord",
}


def openclaw_events(i: int, text: str, secret: str, ident: str | None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "hook": "message_received",
            "eventId": f"oc-{i}-msg",
            "event": {"from": text, "content": text, "metadata": {text: text}},
            "ctx": OC_CTX,
            "ts": _ms(10 * i + 1),
        },
        {
            "hook": "after_tool_call",
            "eventId": f"oc-{i}-tool",
            "event": {
                "toolName": fit(text, 200),
                "params": {"command": text, text: 1},
                "result": long_with_secret_across_the_cut(text, secret),
            },
            "ctx": OC_CTX,
            "ts": _ms(10 * i + 2),
        },
        {
            "hook": "agent_end",
            "eventId": f"oc-{i}-end",
            "event": {
                "messages": [
                    {"role": "user", "content": text},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": text},
                            {"type": "text", "text": f"<think>{text}</think>{text}"},
                        ],
                    },
                ],
                "success": False,
                "error": text,
            },
            "ctx": OC_CTX,
            "ts": _ms(10 * i + 3),
        },
        {
            "hook": "before_agent_finalize",
            "eventId": f"oc-{i}-final",
            "event": {"lastAssistantMessage": long_with_secret_across_the_cut(text, secret)},
            "ctx": OC_CTX,
            "ts": _ms(10 * i + 4),
        },
        {
            "hook": "session_start",
            "eventId": f"oc-{i}-where",
            "event": {},
            "ctx": {
                "agentId": f"where-{i}",
                "sessionId": f"oc-where-{i}",
                "workspaceDir": fit(text, 1000),
                "channelId": fit(text, 100),
            },
            "ts": _ms(10 * i + 5),
        },
    ]
    if ident:
        events += [
            {
                "hook": "session_start",
                "eventId": ident,
                "event": {"resumedFrom": ident},
                "ctx": {"agentId": ident, "sessionId": ident, "sessionKey": ident},
                "ts": _ms(10 * i + 6),
            },
            {
                "hook": ident if len(ident) <= 100 else "long_hook_name",
                "eventId": f"oc-{i}-hook:{ident}",
                "event": {},
                "ctx": {"sessionKey": f"{ident}:discord"},
                "ts": _ms(10 * i + 7),
            },
            {
                "hook": "session_end",
                "eventId": f"oc-{i}-next",
                "event": {"reason": fit(text, 100), "nextSessionId": ident},
                "ctx": {"agentId": ident, "sessionId": ident},
                "ts": _ms(10 * i + 8),
            },
        ]
    return events


MAIN_SESSIONS = ["canonical-session", CC_SESSION, OC_SESSION]
SAMPLE = 40  # other sessions (and agents) read one by one through the API and dashboard

ENDPOINTS = {
    "events": canonical_events,
    "hooks/claude-code": claude_code_events,
    "hooks/openclaw": openclaw_events,
}


# --- looking for pieces -------------------------------------------------------------------


class Haystack:
    """Every text seen, by where it was seen, searched for every piece of every secret."""

    def __init__(self) -> None:
        self.texts: dict[str, list[str]] = {}

    def add(self, where: str, value: Any) -> None:
        bucket = self.texts.setdefault(where, [])
        if isinstance(value, (bytes, bytearray)):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str):
            bucket.append(value.lower())
        else:
            bucket.extend(t.lower() for t in strings_in(value))

    def leaks(self, secrets: list[str], context: str) -> list[str]:
        """'where: piece (of secret...)' for every piece found. ``context`` holds the text
        around the secrets: a piece that is also context (a fixed prefix of a format
        seen elsewhere) is not the secret's."""
        context = context.lower()
        owners: dict[str, list[str]] = {}
        for secret in secrets:
            for piece in _pieces(secret):
                if piece not in context:
                    owners.setdefault(piece, []).append(secret)
        found = []
        for where, texts in self.texts.items():
            # Every window of the text, looked up among the pieces: one pass over the
            # text, however many secrets there are.
            joined = "\x00".join(texts)
            hits: set[str] = set()
            for start in range(0, max(len(joined) - PIECE + 1, 0), _WINDOW_CHUNK):
                stop = min(start + _WINDOW_CHUNK, len(joined) - PIECE + 1)
                hits |= {joined[i : i + PIECE] for i in range(start, stop)} & owners.keys()
            first: dict[str, str] = {}
            for piece in sorted(hits):
                for secret in owners[piece]:
                    first.setdefault(secret, piece)
            found += [f"{where}: {piece!r} of {secret[:6]}…" for secret, piece in first.items()]
        return found


def _context() -> str:
    texts = []
    for text, secrets in CASES:
        for secret in secrets:
            text = text.replace(secret, "\x00")
        texts.append(text)
    return "\n".join(texts)


def _spread(rows: list[Any]) -> list[Any]:
    """``SAMPLE`` rows spread evenly over all of them (every kind of case is met)."""
    return rows[:: max(1, len(rows) // SAMPLE)][:SAMPLE]


def _read_one_by_one() -> list[Session]:
    """The sessions that took every case, and a spread of the others."""
    main = list(Session.objects.filter(external_id__in=MAIN_SESSIONS))
    others = Session.objects.exclude(external_id__in=MAIN_SESSIONS).order_by("created_at")
    return main + _spread(list(others))


def _api_answers(api: APIClient, haystack: Haystack) -> None:
    def get(url: str) -> None:
        while url:
            response = api.get(url)
            assert response.status_code == 200, (url, response.content[:300])
            body = response.json()
            haystack.add("api", body)
            url = body.get("next") if isinstance(body, dict) else None

    get("/api/v1/sessions?page_size=500")
    get("/api/v1/agents")
    # Every read endpoint of the sessions that took every case, and of a sample of the
    # others (one event each; the lists above and the export command cover all of them).
    for session in _read_one_by_one():
        get(f"/api/v1/sessions/{session.pk}")
        get(f"/api/v1/sessions/{session.pk}/events?page_size=1000")
        get(f"/api/v1/sessions/{session.pk}/memory")
        get(f"/api/v1/sessions/{session.pk}/continuity")
        response = api.get(f"/api/v1/sessions/{session.pk}/export?chain=1")
        assert response.status_code == 200
        haystack.add("export (API)", response.json())
    for agent in Agent.objects.all():
        get(f"/api/v1/agents/{agent.pk}/pins?all=1")


def _dashboard_html(team: Any, haystack: Haystack) -> None:
    user = MembershipFactory(team=team, user=UserFactory(username="reader")).user
    client = Client()
    client.force_login(user)
    urls = ["/", "/sessions/", "/agents/", "/live/sessions"]
    for page in range(2, 2 + Session.objects.count() // 25):
        urls.append(f"/sessions/?page={page}")
    shown = _read_one_by_one()
    urls += [f"/sessions/{s.pk}/" for s in shown]
    urls += [f"/live/sessions/{s.pk}" for s in shown]
    urls += [f"/agents/{a.pk}/" for a in _spread(list(Agent.objects.order_by("created_at")))]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        haystack.add("dashboard", response.content)


def _export_command(team: Any, haystack: Haystack) -> None:
    out = io.StringIO()
    call_command("export_sessions", team.slug, stdout=out)
    haystack.add("export (command)", out.getvalue())


def _post_all(api: APIClient, haystack: Haystack, capture: Any) -> None:
    for i, (text, secrets) in enumerate(CASES):
        forms = [f for s in secrets for f in identifier_forms(s)]
        for path, build in ENDPOINTS.items():
            for n, ident in enumerate(forms or [None]):
                body = build(i, text, secrets[0], ident)
                if n:  # the fields once, the identifiers for each further secret
                    body = body[-3:] if path == "hooks/openclaw" else body[-2:]
                # The memory pipeline runs once per session at the end, not per request.
                with capture(execute=False):
                    response = api.post(f"/api/v1/{path}", body, format="json")
                assert response.status_code == 200, (path, i, response.content[:500])
                haystack.add(f"answer of /api/v1/{path}", response.json())
                if not n:  # identifiers alone may all be refused (characters an id lacks)
                    statuses = [r["status"] for r in response.json()["results"]]
                    assert statuses.count("accepted") >= 3, (path, i, response.json())


@pytest.mark.django_db
def test_no_piece_of_a_secret_anywhere(
    api: APIClient,
    team: Any,
    caplog: pytest.LogCaptureFixture,
    django_capture_on_commit_callbacks: Any,
) -> None:
    caplog.set_level(logging.DEBUG)
    haystack = Haystack()
    # The formats are all recognised by the rules on their own (else the rest is moot).
    for text, secrets in CASES:
        assert not _pieces_in(redact_text(text), secrets), text

    _post_all(api, haystack, django_capture_on_commit_callbacks)
    for session in Session.objects.all():
        pipeline.session_process(str(session.pk))

    # The three main sessions took every case, and the places were all stored.
    assert Session.objects.filter(external_id__in=["canonical-session", CC_SESSION]).count() == 2
    assert Session.objects.filter(external_id=OC_SESSION).exists()
    assert Session.objects.filter(external_id__startswith="cc-remote-").count() == 2 * len(CASES)

    for table, row in database_rows():
        haystack.add(f"database {table}", row)
    _api_answers(api, haystack)
    _export_command(team, haystack)
    _dashboard_html(team, haystack)
    haystack.add("logs", [r.getMessage() for r in caplog.records])
    haystack.add("logs", caplog.text)

    leaks = haystack.leaks(SECRETS, _context())
    assert not leaks, f"{len(leaks)} leak(s):\n" + "\n".join(leaks[:80])


# --- continuity requests ----------------------------------------------------------------------


def _continuity_bodies(i: int, text: str, ident: str | None) -> list[dict[str, Any]]:
    words = [w for w in text.split() if w][:200]
    bodies = [
        {
            "source": "generic",
            "session_id": f"cont-{i}",
            "agent_id": "continuity-agent",
            "prompt": text,
            "keywords": [w[:100] for w in words],
        },
        {
            "source": "generic",
            "session_id": f"cont-p-{i}",
            "agent_id": "continuity-agent",
            "prompt": text,
        },
    ]
    if ident:
        bodies.append({"source": "openclaw", "session_id": ident, "agent_id": ident})
    return bodies


def _post_continuity(api: APIClient, haystack: Haystack, bodies: list[dict[str, Any]]) -> None:
    for body in bodies:
        response = api.post("/api/v1/continuity", body, format="json")
        assert response.status_code == 200, (body, response.content[:300])
        haystack.add("answer of /api/v1/continuity", response.json())


@pytest.mark.django_db
def test_no_piece_of_a_secret_through_continuity_identifiers(
    api: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The identifiers of a continuity request (session and agent ids) are keys: stored
    and answered in their keyed form, never in clear."""
    caplog.set_level(logging.DEBUG)
    haystack = Haystack()
    for _text, secrets in CASES:
        for secret in secrets:
            for ident in identifier_forms(secret):
                _post_continuity(
                    api, haystack, [{"source": "openclaw", "session_id": ident, "agent_id": ident}]
                )
    for table, row in database_rows():
        haystack.add(f"database {table}", row)
    _api_answers(api, haystack)
    haystack.add("logs", caplog.text)
    leaks = haystack.leaks(SECRETS, _context())
    assert not leaks, f"{len(leaks)} leak(s):\n" + "\n".join(leaks[:80])


@pytest.mark.django_db
def test_no_piece_of_a_secret_through_continuity_prompts_and_keywords(
    api: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    haystack = Haystack()
    # A prior session for the agent, so the keywords are scored and recorded.
    start = {
        "event_id": "cont-prior-start",
        "kind": "session_start",
        "agent_id": "continuity-agent",
        "session_id": "cont-prior",
        "occurred_at": _time(0),
    }
    end = {**start, "event_id": "cont-prior-end", "kind": "session_end", "occurred_at": _time(5)}
    assert api.post("/api/v1/events", [start, end], format="json").status_code == 200
    for i, (text, _secrets) in enumerate(CASES):
        _post_continuity(api, haystack, _continuity_bodies(i, text, None))
    for table, row in database_rows():
        haystack.add(f"database {table}", row)
    _api_answers(api, haystack)
    haystack.add("logs", caplog.text)
    leaks = haystack.leaks(SECRETS, _context())
    assert not leaks, f"{len(leaks)} leak(s):\n" + "\n".join(leaks[:80])
