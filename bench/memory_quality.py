"""Memory quality on real-shaped sessions: is what SessionHub hands the next session true?

The corpus (``bench/corpus/``, see its README) holds what the real Claude Code CLI fired
while it ran scripted sessions against the Messages API mock, with each session's
transcript, plus hand-written sessions in the shapes of Claude Code 1.0.x, and the ground
truth of every session. This replays it through the hook client as Claude Code runs it:
every hook, in the order it fired, at its (scripted) time, its JSON on the client's stdin,
the session's transcript cut to the lines it had when the hook fired, into a fresh
SessionHub (in process, through the whole Django/DRF stack; the client's HTTP calls go to
it instead of a socket, the rest of the client runs as installed). Then it compares what
SessionHub stored and served with the truth:

- pending tasks: recall and precision of each session's stored pending tasks against the
  tasks open at its end, one to one (a task stored twice counts once; the second is noise);
- unfinished sessions shown as completed: a session whose last turn stopped or failed, and
  whose summary or a preamble files its intention (or the API error) under completed; the
  outcome stored for each session against the truth;
- predecessor links: each session that continues another under a new id (a fork, a 1.0.x
  resume, a conversation opening with a continuation summary) must follow it; a same-id
  resume must land in its own session;
- precision@1 at the start and at the first prompt: the best source of each continuity
  record against the sessions the truth names; where the truth says the first prompt is
  new work, the first prompt must not pick a session of its own;
- phantom items: every pending task and next step a preamble quotes must be a task the
  truth lists (open when its session ended) or what a stopped session was doing;
- key-name topics: hot topics (in the preambles, and in every session's features) that are
  JSON keys of the tool calls, or ids;
- preamble tokens (characters / 4), and a few checks of the rest: turns counted (a
  subagent's end is no turn), the end of a long final message kept, pasted logs kept out
  of what a session was asked, the secrets typed into prompts found nowhere.

Run: ``.venv/bin/python bench/memory_quality.py`` (PostgreSQL when it answers on
127.0.0.1:5432, else SQLite; a throwaway database). ``--sqlite`` forces SQLite,
``--verbose`` prints every preamble served. ``tests/memory/test_memory_quality.py`` runs a
subset of the corpus with the targets as assertions.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import math
import os
import re
import sys
import tempfile
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "bench" / "corpus"
CLIENT = REPO / "integrations" / "claude-code" / "sessionhub_hook.py"
HOME_MARK = "{HOME}"
# The corpus's scripted hour 0. Any fixed moment will do: the replay travels in time.
EPOCH = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
TOKEN_LIMIT = 250
SECRETS = (
    "AKIAYS7BUZSBKMUIV3NR",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzX9a4t2Qe7",
    "Tr0ub4dor-staging-77",
)
LOG_MARKS = ("Traceback", "npm ERR!", "KeyError", "at viteWarn", "request_id=")

# A poster: (path, JSON bytes, token) -> (status, answer).
Poster = Callable[[str, bytes, str], tuple[int, Any]]


# --------------------------------------------------------------------------- the corpus


@dataclass
class Corpus:
    truth: dict[str, dict[str, Any]]
    projects: dict[str, str]
    hooks: list[dict[str, Any]]  # {"session", "t", "hook", "lines"} in firing order
    transcripts: Path

    def only(self, names: Iterable[str]) -> Corpus:
        keep = set(names)
        return Corpus(
            {k: v for k, v in self.truth.items() if k in keep},
            self.projects,
            [h for h in self.hooks if h["session"] in keep],
            self.transcripts,
        )


def load_corpus(folder: Path = CORPUS) -> Corpus:
    truth = json.loads((folder / "truth.json").read_text())
    hooks = [json.loads(line) for line in (folder / "sessions.jsonl").read_text().splitlines()]
    hooks.sort(key=lambda h: h["t"])
    return Corpus(truth["sessions"], truth["projects"], hooks, folder / "claude-projects")


def load_client() -> ModuleType:
    """The hook client, loaded from its file as Claude Code's hooks run it."""
    spec = importlib.util.spec_from_file_location("sessionhub_hook_replayed", CLIENT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- replay


class Replay:
    """A throwaway home with the corpus's projects, the transcripts as they grow, and the
    hook client posting to SessionHub through ``post``."""

    def __init__(self, corpus: Corpus, post: Poster, token: str, home: Path) -> None:
        self.corpus, self.post, self.token, self.home = corpus, post, token, home
        self.client = load_client()
        self.lines: dict[str, list[str]] = {}
        self.written: dict[str, int] = {}
        self.outputs: list[tuple[str, str, str]] = []  # (session, hook, stdout)

    def setup(self) -> None:
        os.environ["HOME"] = str(self.home)
        for name, remote in self.corpus.projects.items():
            folder = self.home / "src" / name
            (folder / ".git").mkdir(parents=True, exist_ok=True)
            config = "[core]\n\trepositoryformatversion = 0\n"
            if remote:
                config += f'[remote "origin"]\n\turl = {remote}\n'
            (folder / ".git" / "config").write_text(config)
        for path in self.corpus.transcripts.rglob("*.jsonl"):
            relative = path.relative_to(self.corpus.transcripts)
            target = str(self.home / ".claude" / "projects" / relative)
            self.lines[target] = (
                path.read_text().replace(HOME_MARK, str(self.home)).splitlines(keepends=True)
            )
        client = self.client

        def post_json(url: str, token: str, body: bytes, deadline: Any) -> Any:
            status, answer = self.post(urlsplit(url).path, body, token)
            return client.Reply(client.classify(status), status, answer)

        client.post_json = post_json

    def _transcripts_as_fired(self, hook: dict[str, Any], lines: dict[str, int | None]) -> None:
        for key, count in lines.items():
            path = hook.get(key)
            if not isinstance(path, str) or path not in self.lines:
                continue
            if count is None:
                continue
            if self.written.get(path) == count:
                continue
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text("".join(self.lines[path][:count]))
            self.written[path] = count

    def run(self, travel: Callable[[datetime], Any]) -> None:
        client = self.client
        config = client.Config(
            {"SESSIONHUB_URL": "http://sessionhub.test", "SESSIONHUB_TOKEN": self.token}
        )
        for item in self.corpus.hooks:
            text = json.dumps(item["hook"], ensure_ascii=False).replace(HOME_MARK, str(self.home))
            hook = json.loads(text)
            self._transcripts_as_fired(hook, item.get("lines") or {})
            out = io.StringIO()
            with travel(EPOCH + timedelta(seconds=item["t"])):
                client.run_hook(text.encode(), config, out, client.Deadline(30.0))
            if out.getvalue():
                self.outputs.append((item["session"], hook["hook_event_name"], out.getvalue()))


# --------------------------------------------------------------------------- judging

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_STOP = set(
    "the a an to of and or for in on at by with from into is are be was it this that "
    "add fix update run check new old".split()
)


def _stem(word: str) -> str:
    word = word.lower()
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _terms(text: str) -> set[str]:
    text = unicodedata.normalize("NFKC", text)
    terms = {_stem(w) for w in _WORD.findall(text) if w.lower() not in _STOP}
    cjk = "".join(c if _CJK.match(c) else " " for c in text).split()
    for run in cjk:
        terms.update(run[i : i + 2] for i in range(len(run) - 1))
    return terms


def same_task(stored: str, truth: str) -> bool:
    """Whether a stored task names the task of the truth: most of the truth's words."""
    a, b = _terms(stored), _terms(truth)
    if not b:
        return False
    return len(a & b) >= max(1, math.ceil(0.6 * len(b)))


def _one_to_one(stored: list[str], truth: list[str]) -> int:
    """How many stored items name distinct truth items (greedy, in order): each truth
    item justifies one stored item, so a task stored twice counts once."""
    free = list(truth)
    matched = 0
    for item in stored:
        for index, wanted in enumerate(free):
            if same_task(item, wanted):
                matched += 1
                del free[index]
                break
    return matched


def _found(truth: list[str], stored: list[str]) -> int:
    """How many truth items some distinct stored item names."""
    free = list(stored)
    found = 0
    for wanted in truth:
        for index, item in enumerate(free):
            if same_task(item, wanted):
                found += 1
                del free[index]
                break
    return found


# An id rather than a word: hex, a piece of a UUID, three digits or more among letters.
_ID_LIKE = re.compile(
    r"^(?:[0-9a-f]{6,}|[0-9a-f]+(?:-[0-9a-f]+)+|(?=.*[a-z]).*\d.*\d.*\d.*|\w+_id)$"
)


def key_names(corpus: Corpus) -> set[str]:
    """Every JSON key of the corpus's tool inputs and outputs (lowercased), but words that
    some prompt or tool input also says in its text: those are content too."""
    keys: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                keys.add(str(key).lower())
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    said: set[str] = set()

    def words(value: Any) -> None:
        if isinstance(value, str):
            said.update(w.lower() for w in _WORD.findall(value))
        elif isinstance(value, dict):
            for inner in value.values():
                words(inner)
        elif isinstance(value, list):
            for inner in value:
                words(inner)

    for item in corpus.hooks:
        walk(item["hook"].get("tool_input"))
        walk(item["hook"].get("tool_response"))
        words(item["hook"].get("prompt"))
        words(item["hook"].get("tool_input"))
    return keys - said


def _preamble_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = defaultdict(list)
    current = ""
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("-") or line.startswith("  "):
            sections[current].append(line.lstrip("- ").strip())
        else:
            head, _, rest = line.partition(":")
            current = head.strip()
            if rest.strip():
                sections[current].append(rest.strip())
    return sections


@dataclass
class Result:
    tasks_truth: int = 0
    tasks_found: int = 0
    tasks_stored: int = 0
    tasks_right: int = 0
    unfinished: int = 0
    shown_completed: list[str] = field(default_factory=list)
    outcome_right: int = 0
    outcome_total: int = 0
    links_expected: int = 0
    links_found: list[str] = field(default_factory=list)
    links_missed: list[str] = field(default_factory=list)
    resumed_expected: int = 0
    resumed_ok: int = 0
    start_total: int = 0
    start_right: list[str] = field(default_factory=list)
    start_wrong: list[str] = field(default_factory=list)
    prompt_total: int = 0
    prompt_right: list[str] = field(default_factory=list)
    prompt_wrong: list[str] = field(default_factory=list)
    preambles: int = 0
    phantoms: list[str] = field(default_factory=list)
    key_topics_preamble: list[str] = field(default_factory=list)
    key_topics_features: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    turns_wrong: list[str] = field(default_factory=list)
    end_lost: list[str] = field(default_factory=list)
    log_in_asked: list[str] = field(default_factory=list)
    secrets_found: list[str] = field(default_factory=list)
    task_misses: list[str] = field(default_factory=list)
    task_noise: list[str] = field(default_factory=list)
    served: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.tasks_found / self.tasks_truth if self.tasks_truth else 1.0

    @property
    def precision(self) -> float:
        return self.tasks_right / self.tasks_stored if self.tasks_stored else 1.0

    def p_at_1(self, stage: str) -> float:
        right, total = (
            (self.start_right, self.start_total)
            if stage == "start"
            else (self.prompt_right, self.prompt_total)
        )
        return len(right) / total if total else 1.0

    def meets_targets(self) -> list[str]:
        """The targets this run misses (empty: all met)."""
        missed = []
        if self.recall < 0.9:
            missed.append(f"pending-task recall {self.recall:.2f} < 0.9")
        if self.precision < 0.9:
            missed.append(f"pending-task precision {self.precision:.2f} < 0.9")
        if self.shown_completed:
            missed.append(f"unfinished shown as completed: {self.shown_completed}")
        if self.links_missed:
            missed.append(f"predecessor links missed: {self.links_missed}")
        if self.resumed_ok != self.resumed_expected:
            missed.append("a same-id resume did not land in its session")
        if self.p_at_1("prompt") < 0.95:
            missed.append(f"precision@1 at the first prompt {self.p_at_1('prompt'):.2f} < 0.95")
        if self.phantoms:
            missed.append(f"phantom items: {self.phantoms}")
        if self.key_topics_preamble:
            missed.append(f"key-name topics: {self.key_topics_preamble}")
        if self.tokens and max(self.tokens) > TOKEN_LIMIT:
            missed.append(f"a preamble of {max(self.tokens)} tokens")
        return missed


def evaluate(corpus: Corpus) -> Result:
    """Compare what SessionHub stored and served with the corpus's truth."""
    from lifecycle.models import LifecycleEvent, Session
    from memory.continuity.record import record_as_dict
    from memory.models import ContinuityRecord, SessionFeatures, Summary

    result = Result()
    truth = corpus.truth
    by_id = {t["session_id"]: name for name, t in truth.items()}
    sessions = {s.external_id: s for s in Session.objects.filter(external_id__in=list(by_id))}
    name_of_pk = {s.pk: by_id[s.external_id] for s in sessions.values()}
    project_tasks: dict[str, list[str]] = defaultdict(list)
    doing: dict[str, str] = {}
    for name, t in truth.items():
        project_tasks[t["project"]].extend(t["open_tasks"])
        if t["doing"]:
            doing[name] = t["doing"]

    def open_at(name: str) -> list[str]:
        """The project's tasks still open when this session starts: listed open by an
        earlier session, and finished by no session before this one."""
        here = truth[name]
        earlier = [
            t
            for t in truth.values()
            if t["project"] == here["project"] and t["hour"] < here["hour"]
        ]
        closed = [task for t in earlier for _, task in t.get("closes", [])]
        return [
            task
            for t in earlier
            for task in t["open_tasks"]
            if not any(same_task(task, done) and same_task(done, task) for done in closed)
        ]

    keys = key_names(corpus)

    for name, t in truth.items():
        session = sessions.get(t["session_id"])
        if session is None:
            result.links_missed.append(f"{name}: not stored")
            continue
        features = SessionFeatures.objects.filter(session=session).first()
        stored = [task["text"] for task in (features.pending_tasks if features else [])]
        wanted = list(t["open_tasks"])
        result.tasks_truth += len(wanted)
        result.tasks_stored += len(stored)
        found = _found(wanted, stored)
        right = _one_to_one(stored, wanted)
        result.tasks_found += found
        result.tasks_right += right
        if found < len(wanted):
            result.task_misses.append(f"{name}: want {wanted}, stored {stored}")
        if right < len(stored):
            result.task_noise.append(f"{name}: stored {stored}, want {wanted}")
        for topic in features.hot_topics if features else []:
            if topic.lower() in keys or _ID_LIKE.match(topic.lower()):
                result.key_topics_features.append(f"{name}:{topic}")

        summary = Summary.objects.filter(session=session).first()
        completed = (summary.completed if summary else "").lower()
        outcome = getattr(summary, "outcome", "") if summary else ""
        result.outcome_total += 1
        result.outcome_right += outcome == t["outcome"]
        if t["outcome"] != "finished":
            result.unfinished += 1
            said = t["doing"].lower()
            if (said and said in completed) or "api error" in completed:
                result.shown_completed.append(f"{name}: completed says {completed[:120]!r}")
        if (
            name.startswith("dp-01")
            and summary
            and "48 to 19 minutes" not in (summary.final_message + summary.completed)
        ):
            result.end_lost.append(name)
        if summary and any(mark in summary.request for mark in LOG_MARKS):
            result.log_in_asked.append(f"{name}: {summary.request[:100]!r}")
        if t["turns"] is not None and session.turn_count != t["turns"]:
            result.turns_wrong.append(f"{name}: {session.turn_count} turns, truth {t['turns']}")

        if t["predecessor"]:
            result.links_expected += 1
            previous = name_of_pk.get(session.previous_session_id)
            if previous == t["predecessor"]:
                result.links_found.append(name)
            else:
                result.links_missed.append(f"{name}: follows {previous}, truth {t['predecessor']}")
        if t["resumed"]:
            result.resumed_expected += 1
            starts = LifecycleEvent.objects.filter(session=session, kind="session_resume").count()
            result.resumed_ok += starts >= 1 and session.suspend_count >= 1

        records = {
            r.stage: r
            for r in ContinuityRecord.objects.filter(
                session=session, trigger=ContinuityRecord.Trigger.AUTOMATIC
            )
        }
        tops = {}
        for stage, record in records.items():
            answer = record_as_dict(record)
            source = answer["sources"][0]["session_id"] if answer["sources"] else None
            tops[stage] = name_of_pk.get(_uuid(source)) if source else None
        why = {stage: getattr(record, "reason", "") for stage, record in records.items()}
        start_top = tops.get(ContinuityRecord.Stage.START)
        prompt_top = tops.get(ContinuityRecord.Stage.PROMPT, start_top)
        if t["start"] is not None:
            result.start_total += 1
            label = f"{name}: {start_top} (truth {'/'.join(t['start'])}) {why.get('start')}"
            (result.start_right if start_top in t["start"] else result.start_wrong).append(label)
        if t["prompt"] is not None:
            result.prompt_total += 1
            ok = prompt_top in t["prompt"] if t["prompt"] else prompt_top == start_top
            label = (
                f"{name}: {prompt_top} (truth {'/'.join(t['prompt']) or 'new work'}) "
                f"{why.get('prompt')}"
            )
            (result.prompt_right if ok else result.prompt_wrong).append(label)

        for stage, record in records.items():
            text = record.preamble
            if not text:
                continue
            result.preambles += 1
            result.served.append((name, stage, text))
            result.tokens.append(math.ceil(len(text) / 4))
            lowered = text.lower()
            for secret in SECRETS:
                if secret.lower() in lowered:
                    result.secrets_found.append(f"{name}/{stage}")
            sections = _preamble_sections(text)
            tasks_here = open_at(name)
            for item in sections.get("PENDING TASKS", []):
                clean = re.sub(r"\(\d+[hd] ago\)$|\(<1h ago\)$", "", item).strip()
                if not any(same_task(clean, wanted) for wanted in tasks_here):
                    result.phantoms.append(f"{name}/{stage}: task {clean!r} (not open)")
            for block in ("LAST SESSION", "EARLIER SESSION"):
                for key, lines in sections.items():
                    if not key.startswith(block):
                        continue
                    for line in lines:
                        if not line.startswith("next:"):
                            continue
                        step = line[5:].strip()
                        allowed = tasks_here + list(doing.values())
                        if not any(
                            same_task(step, wanted) or same_task(wanted, step) for wanted in allowed
                        ):
                            result.phantoms.append(f"{name}/{stage}: next {step!r}")
            for key, lines in sections.items():
                if key.startswith(("LAST SESSION", "EARLIER SESSION")):
                    for line in lines:
                        if line.startswith("completed:"):
                            said = line.lower()
                            for other, what in doing.items():
                                if what.lower() in said:
                                    result.shown_completed.append(f"{name}/{stage} quotes {other}")
            for line in sections.get("HOT TOPICS", []):
                for topic in (x.strip() for x in line.split(",")):
                    if topic.lower() in keys or _ID_LIKE.match(topic.lower()):
                        result.key_topics_preamble.append(f"{name}/{stage}:{topic}")

    for secret in SECRETS:
        for model, fields in (
            (Summary, ("request", "completed", "final_message", "learned", "next_steps")),
            (ContinuityRecord, ("preamble",)),
        ):
            for row in model.objects.all():
                if any(secret in str(getattr(row, f)) for f in fields):
                    result.secrets_found.append(f"{model.__name__}:{secret[:6]}…")
    return result


def _uuid(value: str) -> Any:
    import uuid

    return uuid.UUID(value)


def table(result: Result) -> str:
    tokens = result.tokens or [0]
    rows = [
        (
            "pending-task recall (target ≥ 0.90)",
            f"{result.recall:.2f} ({result.tasks_found}/{result.tasks_truth})",
        ),
        (
            "pending-task precision (target ≥ 0.90)",
            f"{result.precision:.2f} ({result.tasks_right}/{result.tasks_stored})",
        ),
        (
            "unfinished shown as completed, in summaries or preambles (target 0)",
            f"{len(result.shown_completed)} ({result.unfinished} sessions unfinished)",
        ),
        ("last-turn outcome right", f"{result.outcome_right}/{result.outcome_total}"),
        (
            "predecessor links found / expected",
            f"{len(result.links_found)}/{result.links_expected}",
        ),
        ("same-id resumes in their own session", f"{result.resumed_ok}/{result.resumed_expected}"),
        (
            "precision@1 at SessionStart",
            f"{result.p_at_1('start'):.2f} ({len(result.start_right)}/{result.start_total})",
        ),
        (
            "precision@1 at the first prompt (target ≥ 0.95)",
            f"{result.p_at_1('prompt'):.2f} ({len(result.prompt_right)}/{result.prompt_total})",
        ),
        (
            "phantom or noise items in preambles (target 0)",
            f"{len(result.phantoms)} in {result.preambles} preambles",
        ),
        ("key-name topics in preambles (target 0)", str(len(result.key_topics_preamble))),
        ("key-name topics in stored features", str(len(result.key_topics_features))),
        (
            "preamble tokens max / mean (target ≤ 250)",
            f"{max(tokens)} / {sum(tokens) / len(tokens):.0f}",
        ),
        ("turns miscounted", str(len(result.turns_wrong))),
        ("long final message lost its end", str(len(result.end_lost))),
        ("pasted logs in 'asked'", str(len(result.log_in_asked))),
        ("secrets found in summaries or preambles", str(len(result.secrets_found))),
    ]
    out = ["| measure | value |", "| --- | --- |"]
    out += [f"| {a} | {b} |" for a, b in rows]
    return "\n".join(out)


def details(result: Result) -> str:
    lines = []
    for label, items in (
        ("missed task", result.task_misses),
        ("noise task", result.task_noise),
        ("shown completed", result.shown_completed),
        ("link missed", result.links_missed),
        ("start wrong", result.start_wrong),
        ("prompt wrong", result.prompt_wrong),
        ("phantom", result.phantoms),
        ("key topic (preamble)", result.key_topics_preamble),
        ("key topic (features)", result.key_topics_features),
        ("turns", result.turns_wrong),
        ("end lost", result.end_lost),
        ("log in asked", result.log_in_asked),
        ("secret", result.secrets_found),
    ):
        lines += [f"{label}: {item}" for item in items]
    return "\n".join(lines)


def replay_and_evaluate(corpus: Corpus, post: Poster, token: str) -> Result:
    """Replay the corpus into the current database, then judge it."""
    import time_machine

    with tempfile.TemporaryDirectory(prefix="sessionhub-replay-") as home:
        old_home = os.environ.get("HOME")
        replay = Replay(corpus, post, token, Path(home))
        try:
            replay.setup()
            replay.run(lambda moment: time_machine.travel(moment, tick=False))
        finally:
            if old_home is not None:
                os.environ["HOME"] = old_home
        return evaluate(corpus)


def pin_every_agent(text: str) -> None:
    """A lead's critical pin on every agent that has none yet (``--critical-pin``)."""
    from lifecycle.models import Agent
    from memory.services.pins import pin_create

    for agent in Agent.objects.exclude(pins__label="Team rule"):
        pin_create(
            agent=agent, label="Team rule", content=text, priority="critical", pinned_by="lead"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sqlite", action="store_true", help="use SQLite, not PostgreSQL")
    parser.add_argument("--only", help="comma-separated session names")
    parser.add_argument("--verbose", action="store_true", help="print every preamble served")
    parser.add_argument(
        "--critical-pin",
        metavar="TEXT",
        help="a lead pins TEXT as a critical pin on every agent as soon as it appears: "
        "every preamble must quote it and stay within its budget",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.sqlite:
        os.environ["DATABASE_URL"] = "sqlite:///:memory:"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessionhub.settings_test")
    import logging

    import django

    django.setup()
    logging.disable(logging.INFO)
    from django.db import connection
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases
    from rest_framework.test import APIClient

    from sessionhub.services import api_token_create, team_get_or_create

    corpus = load_corpus()
    if args.only:
        corpus = corpus.only(args.only.split(","))
    setup_test_environment()
    config = setup_databases(verbosity=0, interactive=False)
    try:
        team = team_get_or_create(slug="corpus", name="Corpus")
        token = api_token_create(team=team, name="corpus-token", scopes=["ingest", "read"])[1]
        client = APIClient()

        def post(path: str, body: bytes, token: str) -> tuple[int, Any]:
            response = client.post(
                path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
            )
            if args.critical_pin:
                pin_every_agent(args.critical_pin)
            try:
                return response.status_code, response.json()
            except ValueError:
                return response.status_code, None

        result = replay_and_evaluate(corpus, post, token)
        projects = {t["project"] for t in corpus.truth.values()}
        print(
            f"database: {connection.vendor}; {len(corpus.truth)} sessions over "
            f"{len(projects)} projects, {len(corpus.hooks)} hook calls"
        )
        print(table(result))
        if args.critical_pin:
            quoted = sum(1 for _, _, text in result.served if args.critical_pin[:60] in text)
            print(f"| preambles quoting the critical pin | {quoted} of {len(result.served)} |")
        print(details(result))
        if args.verbose:
            for name, stage, text in result.served:
                print(f"\n--- {name} at {stage}\n{text}")
        missed = result.meets_targets()
        print("targets met" if not missed else "targets missed: " + "; ".join(missed))
    finally:
        teardown_databases(config, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
