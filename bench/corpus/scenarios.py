# ruff: noqa: RUF001 - prompts and answers in Chinese and Japanese use their own punctuation
"""The scripted sessions of the memory-quality corpus, and what is true of each.

Each session is one Claude Code session as SessionHub sees it (one session id), run by
``generate.py`` through the real CLI against the Messages API mock, one turn per CLI run:
the first run starts it (or forks it from an earlier session), the others resume it by
id, as a person does with ``claude --resume`` or ``--continue``. A turn's steps are what
the mock model does: thinking, words said along the way, tool calls (the task-list tools
among them), an API error, and a final answer.

The sessions follow the habits seen in real transcripts: a task list written at the start
of the work and left half done, a numbered plan in the model's thinking, a last message
that announces work instead of reporting it ("Now let me…"), a turn that dies on an
overloaded API, a first prompt that is the same boilerplate in many sessions ("load
claude.md"), prompts in Chinese and Japanese, a prompt with a pasted build log, a long
final report, a secret typed into a prompt, a compaction, a background subagent, a fork
of an earlier session. The words are ours.

``Truth`` is written down from the story, before anything was measured: the tasks open at
the end of the session (the task list's open items and the open things its prompts or
final message name explicitly), whether its last turn finished, the session it continues
(a fork or a new-id resume), and which earlier sessions are right to hand it at its start
and at its first prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.integrations.mock_anthropic import Step

# Projects: a name, and the git remote of its repository ("" for a folder without one).
PROJECTS = {
    "billing-api": "https://git.example.com/acme/billing-api.git",
    "web-dashboard": "git@github.com:acme/web-dashboard.git",
    "infra-scripts": "",
    "mobile-app": "https://github.com/acme/mobile-app.git",
    "data-pipeline": "https://gitlab.example.org/data/pipeline.git",
    "legacy-crm": "https://git.example.com/acme/legacy-crm.git",
}

# The boilerplate first prompt many sessions open with, and what the model does with it.
BOILERPLATE = "load claude.md"


@dataclass(frozen=True)
class Truth:
    """What is true of a session, written from its story."""

    # Tasks still open when it ended (any wording that names them is a match).
    open_tasks: tuple[str, ...] = ()
    outcome: str = "finished"  # finished | stopped | failed
    # For a stopped turn: words of what it was doing when it stopped.
    doing: str = ""
    # The session it continues when it has a new id (a fork, a resume of an older
    # version, a conversation that opens with a continuation summary).
    predecessor: str | None = None
    # Right prior sessions at its start and at its first prompt. None: nothing to
    # judge (no prior session of the project, or nothing at the start tells which).
    # (): new work, no prior session is about it; the first prompt must not pick one.
    start: tuple[str, ...] | None = None
    prompt: tuple[str, ...] | None = None
    # Turns the user had (a subagent's end is not one).
    turns: int | None = None
    # A same-id resume: the later runs must land in this very session.
    resumed: bool = False
    # Tasks of earlier sessions this one finished: (session, task), as they were written.
    closes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Turn:
    """One CLI run: a prompt and what the model does with it."""

    prompt: str
    steps: tuple[Step, ...] = ()
    # Minutes after the session's start (scripted time) at which this run starts.
    minute: float = 0.0
    # "resume": claude --resume <this session>; "continue": claude --continue.
    how: str = "resume"


@dataclass(frozen=True)
class Session:
    name: str
    project: str
    hour: float  # scripted start, hours after the corpus epoch
    turns: tuple[Turn, ...]
    truth: Truth
    # "tasks": TaskCreate/TaskUpdate; "todo": TodoWrite; "": neither offered.
    tools: str = "tasks"
    fork_of: str = ""  # starts as claude --resume <that session> --fork-session
    # Scripts for subagents this session starts: their prompt -> steps.
    subagents: dict[str, tuple[Step, ...]] = field(default_factory=dict)
    compact_summary: str = ""


def task(subject: str, form: str = "") -> Step:
    return Step(
        tool="TaskCreate",
        input={"subject": subject, "description": subject, "activeForm": form or subject},
    )


def update(task_id: int, status: str, say: str = "", think: str = "") -> Step:
    return Step(
        say=say,
        think=think,
        tool="TaskUpdate",
        input={"taskId": str(task_id), "status": status},
    )


def todos(*items: tuple[str, str], say: str = "", think: str = "") -> Step:
    return Step(
        say=say,
        think=think,
        tool="TodoWrite",
        input={
            "todos": [
                {"content": content, "status": status, "activeForm": content}
                for content, status in items
            ]
        },
    )


def bash(command: str, say: str = "", think: str = "") -> Step:
    return Step(say=say, think=think, tool="Bash", input={"command": command})


def read(path: str, say: str = "") -> Step:
    return Step(say=say, tool="Read", input={"file_path": path})


def final(text: str, think: str = "") -> Step:
    return Step(say=text, think=think)


def boilerplate(minute: float = 0.0) -> Turn:
    """The shared first prompt: the model reads the project's notes and says so."""
    return Turn(
        BOILERPLATE,
        (read("CLAUDE.md"), final("Loaded the project notes from CLAUDE.md.")),
        minute=minute,
    )


PLAN_THINKING = (
    "The user wants the webhook signatures checked. Plan:\n"
    "1. Read the payments handler and the settings module\n"
    "2. Look for any issues or incomplete implementations\n"
    "3. Add the verification with a constant-time compare\n"
    "4. Next: write the tests for rejected signatures\n"
    "TODO: check how the secret is rotated"
)

PASTED_DEPLOY_LOG = "\n".join(
    [
        "The dashboard build fails on CI since this morning. Log:",
        "",
        "```",
        "$ npm run build",
        "> web-dashboard@3.4.0 build",
        "> vite build",
        "vite v5.4.2 building for production...",
        "transforming (412) src/components/DatePicker/index.tsx",
        '[vite]: Rollup failed to resolve import "date-f'
        'ns-tz" from "src/components/DatePicker/zone.ts".',
        "This is most likely unintended because it can break your application at runtime.",
        "error during build:",
        'Error: [vite]: Rollup failed to resolve import "dat'
        'e-fns-tz" from "src/components/DatePicker/zone.ts".',
        "    at viteWarn (node_modules/vite/dist/node/chunks/dep-CDnG8rE7.js:65839:17)",
        "    at onwarn (node_modules/@vitejs/plugin-react/dist/index.mjs:280:9)",
        "    at onRollupWarning (node_modules/vite/dist/node/chunks/dep-CDnG8rE7.js:65869:5)",
        "    // TODO: remove this fallback once the locale loader is async",
        "npm ERR! code 1",
        "npm ERR! path /builds/acme/web-dashboard",
        "npm ERR! command failed",
        "```",
        "",
        "What broke?",
    ]
)

WEBHOOK_LOG_PROMPT = """The webhook handler returns 500 on replayed events. From the API log:

```
2026-03-02T09:14:07Z ERROR payments.webhooks request_id=7f3a9c event=evt_1Q8 replay=true
Traceback (most recent call last):
  File "payments/webhooks.py", line 88, in receive
    key = request.headers["Idempotency-Key"]
KeyError: 'Idempotency-Key'
2026-03-02T09:14:07Z INFO  http status=500 path=/webhooks/stripe duration_ms=12
```

Can you fix it?"""


def long_report() -> str:
    """A profiling report of about 10 KB whose last section says what was done."""
    sections = []
    stages = [
        ("extract", 6.1, "reads the day's partitions from the object store"),
        ("validate", 3.4, "checks row schemas and drops malformed rows"),
        ("dedupe", 34.2, "removes duplicate events by a nested-loop join on the event key"),
        ("enrich", 2.9, "joins customer attributes from the warehouse dimension tables"),
        ("aggregate", 1.1, "builds the daily rollups per account and product"),
        ("load", 0.6, "writes the rollups and the cleaned events back to the warehouse"),
    ]
    for name, minutes, what in stages:
        body = [
            f"### Stage: {name}",
            "",
            f"The {name} stage {what}. It took {minutes} minutes of the 48-minute run.",
        ]
        for run in range(1, 9):
            body.append(
                f"- night {run}: {name} ran {minutes + run * 0.1:.1f} min, peak memory "
                f"{1.2 + run * 0.05:.2f} GB, {120 + run * 7} thousand rows per minute, "
                f"spill to disk {'yes' if name == 'dedupe' else 'no'}"
            )
        body.append("")
        body.append(
            f"Observations for {name}: the timing is stable across nights and scales with "
            "the number of input partitions; nothing in the logs suggests retries or "
            "throttling from the object store or the warehouse."
        )
        sections.append("\n".join(body))
    head = (
        "# Nightly ETL profile\n\nI profiled eight nights of the ETL job with the stage "
        "timers and the memory sampler. Below, each stage with its timings and what it "
        "does, then what I changed.\n"
    )
    tail = (
        "\n## Summary\n\nThe ETL spends 71% of its time in the dedupe step, which used a "
        "nested-loop join. I switched it to a hash join on the event key; the nightly run "
        "drops from 48 to 19 minutes and the output is identical on all eight nights. "
        "Remaining: backfill the partition statistics."
    )
    text = head + "\n\n".join(sections)
    while len(text) < 9800:
        text += (
            "\n\nAppendix note: the sampler ran at one-second intervals and its overhead "
            "stayed under one percent of the run time on every night measured."
        )
    return text + tail


COMPACT_SUMMARY = (
    "Analysis:\nThe user asked for a Postgres volume backup script with rotation; I wrote "
    "it and ran it once.\n\nSummary:\n1. Primary Request and Intent:\n   Write a backup "
    "script for the Postgres volumes that keeps seven daily copies.\n2. Key Technical "
    "Concepts:\n   - pg_basebackup, rotation by age\n3. Files and Code Sections:\n   - "
    "scripts/backup_pg.sh: the backup and the rotation\n4. Errors and fixes:\n   - none\n"
    "5. Pending Tasks:\n   - Add a test for the rotation\n6. Current Work:\n   The script "
    "runs; the rotation test is next.\n7. Optional Next Step:\n   Add a test for the "
    "rotation."
)


SESSIONS: tuple[Session, ...] = (
    # ------------------------------------------------------------------ billing-api
    Session(
        "ba-01",
        "billing-api",
        0.0,
        (
            Turn(
                "Add Stripe webhook signature verification to the payments endpoint",
                (
                    task("Verify webhook signatures", "Verifying signatures"),
                    task("Read the signing secret from settings"),
                    task("Add tests for rejected signatures"),
                    task("Document the webhook setup"),
                    Step(tool="Read", input={"file_path": "payments/webhooks.py"}),
                    update(1, "completed", say="The handler now checks the signature header."),
                    update(2, "completed"),
                    update(3, "in_progress"),
                    final(
                        "Signature verification is in place and the signing secret is read "
                        "from settings.\n\nNow let me run the webhook test suite to check "
                        "the rejected-signature cases.",
                        think=PLAN_THINKING,
                    ),
                ),
            ),
        ),
        Truth(
            open_tasks=("Add tests for rejected signatures", "Document the webhook setup"),
            outcome="stopped",
            doing="run the webhook test suite",
        ),
    ),
    Session(
        "ba-02",
        "billing-api",
        3.0,
        (
            boilerplate(),
            Turn(
                "Continue the webhook work: finish the tests for rejected signatures",
                (
                    task("Add tests for rejected signatures"),
                    bash("pytest tests/test_webhooks.py -q"),
                    update(1, "completed"),
                    final(
                        "Added three tests for rejected signatures (bad header, stale "
                        "timestamp, wrong secret); all 41 tests pass.\n\nNext: document "
                        "the webhook setup in docs/webhooks.md."
                    ),
                ),
                minute=2,
                how="continue",
            ),
        ),
        Truth(
            closes=(("ba-01", "Add tests for rejected signatures"),),
            open_tasks=("document the webhook setup",),
            start=("ba-01",),
            prompt=("ba-01",),
        ),
    ),
    Session(
        "ba-03",
        "billing-api",
        5.0,
        (
            Turn(
                "Refactor the invoice PDF renderer to use the new template engine",
                (
                    task("Port the invoice layout to templates"),
                    task("Update the snapshot tests"),
                    task("Remove the old renderer helpers"),
                    update(1, "completed"),
                    bash("pytest tests/invoices -q"),
                    update(2, "completed"),
                    update(3, "completed"),
                    final(
                        "Done: the invoice renderer uses the template engine, the 12 "
                        "snapshot tests are updated, and the old helper module is removed."
                    ),
                ),
            ),
        ),
        Truth(start=("ba-02", "ba-01"), prompt=()),
    ),
    Session(
        "ba-04",
        "billing-api",
        9.0,
        (
            Turn(
                WEBHOOK_LOG_PROMPT,
                (
                    bash("grep -n Idempotency-Key payments/webhooks.py"),
                    Step(
                        tool="Edit",
                        input={
                            "file_path": "payments/webhooks.py",
                            "old_string": 'request.headers["Idempotency-Key"]',
                            "new_string": 'request.headers.get("Idempotency-Key")',
                        },
                        think="The replayed events have no idempotency header. The user is "
                        "right - this breaks because:",
                    ),
                    final(
                        "The 500 came from the idempotency check reading a header that "
                        "replayed events do not carry; replayed events now get a 200 with "
                        "the stored result.\n\nRemaining: add a metric for replayed events."
                    ),
                ),
            ),
        ),
        Truth(open_tasks=("add a metric for replayed events",), prompt=("ba-02", "ba-01")),
    ),
    Session(
        "ba-05",
        "billing-api",
        12.0,
        (
            boilerplate(),
            Turn(
                "Add the metric for replayed webhook events",
                (
                    task("Add a counter for replayed webhook events"),
                    update(1, "in_progress"),
                    bash("grep -rn prometheus payments/"),
                    Step(status=529),
                ),
                minute=3,
                how="resume",
            ),
        ),
        Truth(
            open_tasks=("Add a counter for replayed webhook events",),
            outcome="failed",
            start=("ba-04",),
            prompt=("ba-04",),
        ),
    ),
    Session(
        "ba-06",
        "billing-api",
        13.0,
        (
            Turn(
                "Retry the replayed-events metric",
                (
                    task("Add a counter for replayed webhook events"),
                    bash("pytest tests/test_metrics.py -q"),
                    update(1, "completed"),
                    final(
                        "The replayed-events counter is exported as webhook_replayed_total "
                        "and covered by a test."
                    ),
                ),
            ),
        ),
        Truth(
            closes=(
                ("ba-05", "Add a counter for replayed webhook events"),
                ("ba-04", "add a metric for replayed events"),
            ),
            predecessor="ba-05",
            prompt=("ba-05", "ba-04"),
        ),
        fork_of="ba-05",
    ),
    Session(
        "ba-07",
        "billing-api",
        30.0,
        (
            Turn(
                "Write the webhook setup docs we left open",
                (
                    Step(
                        tool="Write",
                        input={
                            "file_path": "docs/webhooks.md",
                            "content": "# Webhooks\n\nSet the signing secret in settings.",
                        },
                    ),
                    final(
                        "Wrote docs/webhooks.md: how to set the signing secret, how replayed "
                        "events are answered, and how to rotate the secret."
                    ),
                ),
            ),
        ),
        Truth(
            closes=(
                ("ba-01", "Document the webhook setup"),
                ("ba-02", "document the webhook setup"),
            ),
            prompt=("ba-02", "ba-01"),
        ),
    ),
    Session(
        "ba-08",
        "billing-api",
        52.0,
        (
            boilerplate(),
            Turn(
                "Link the new webhook docs from the README",
                (bash("grep -n docs README.md"), final("Linked docs/webhooks.md from the README.")),
                minute=2,
                how="continue",
            ),
        ),
        Truth(start=("ba-07",), prompt=("ba-07",)),
    ),
    # ------------------------------------------------------------------ web-dashboard
    Session(
        "wd-01",
        "web-dashboard",
        1.0,
        (
            boilerplate(),
            Turn(
                "Build the usage chart for the admin page: weekly active users by plan",
                (
                    todos(
                        ("Write the weekly actives query", "in_progress"),
                        ("Add the chart component", "pending"),
                        ("Add the plan legend", "pending"),
                        ("Handle the empty state", "pending"),
                        think="Plan:\n1. Query weekly actives grouped by plan\n2. Render a "
                        "stacked bar chart\n3. Look for any issues with the date buckets",
                    ),
                    bash("npm test -- usage"),
                    todos(
                        ("Write the weekly actives query", "completed"),
                        ("Add the chart component", "completed"),
                        ("Add the plan legend", "in_progress"),
                        ("Handle the empty state", "pending"),
                    ),
                    final(
                        "The chart renders weekly actives by plan from the new query. Now "
                        "let me wire the legend colours to the plan palette."
                    ),
                ),
                minute=1,
                how="continue",
            ),
        ),
        Truth(
            open_tasks=("Add the plan legend", "Handle the empty state"),
            outcome="stopped",
            doing="wire the legend colours",
        ),
        tools="todo",
    ),
    Session(
        "wd-02",
        "web-dashboard",
        4.0,
        (
            boilerplate(),
            Turn(
                "Fix the date picker that resets on every re-render",
                (
                    todos(("Find why the picker state resets", "in_progress")),
                    bash("grep -rn useMemo src/components/DatePicker"),
                    todos(("Find why the picker state resets", "completed")),
                    final(
                        "Fixed: the picker kept its state in a memo keyed by the locale "
                        "object, which changed on every render; it now keys by the locale "
                        "code."
                    ),
                ),
                minute=1,
                how="continue",
            ),
        ),
        Truth(start=("wd-01",), prompt=("wd-01",)),
        tools="todo",
    ),
    Session(
        "wd-03",
        "web-dashboard",
        7.0,
        (
            boilerplate(),
            Turn(
                "Finish the usage chart legend and the empty state",
                (
                    todos(
                        ("Add the plan legend", "in_progress"),
                        ("Handle the empty state", "pending"),
                    ),
                    bash("npm test -- usage"),
                    todos(
                        ("Add the plan legend", "completed"),
                        ("Handle the empty state", "completed"),
                        ("Add a screenshot to the PR description", "pending"),
                    ),
                    final(
                        "The legend uses the plan palette and an empty week shows a "
                        "placeholder instead of a blank chart.\n\nNext: add a screenshot to "
                        "the PR description."
                    ),
                ),
                minute=1,
                how="continue",
            ),
        ),
        Truth(
            closes=(("wd-01", "Add the plan legend"), ("wd-01", "Handle the empty state")),
            open_tasks=("Add a screenshot to the PR description",),
            start=("wd-01",),
            prompt=("wd-01",),
        ),
        tools="todo",
    ),
    Session(
        "wd-04",
        "web-dashboard",
        10.0,
        (
            Turn(
                PASTED_DEPLOY_LOG,
                (
                    bash("grep -n date-fns-tz package.json"),
                    final(
                        "The build broke because the date picker imports date-fns-tz, which "
                        "was only a dev dependency; I moved it to dependencies and the CI "
                        "build passes."
                    ),
                ),
            ),
        ),
        Truth(prompt=("wd-02",)),
        tools="todo",
    ),
    Session(
        "wd-05",
        "web-dashboard",
        26.0,
        (
            boilerplate(),
            Turn(
                "Add the screenshot and open the pull request for the usage chart",
                (
                    todos(("Add a screenshot to the PR description", "in_progress")),
                    bash("gh pr create --fill"),
                    todos(("Add a screenshot to the PR description", "completed")),
                    final("Opened the pull request for the usage chart with the screenshot."),
                ),
                minute=1,
                how="continue",
            ),
        ),
        Truth(
            closes=(("wd-03", "Add a screenshot to the PR description"),),
            start=("wd-03",),
            prompt=("wd-03",),
        ),
        tools="todo",
    ),
    Session(
        "wd-06",
        "web-dashboard",
        28.0,
        (
            Turn(
                "Add dark mode to the settings page",
                (
                    todos(
                        ("Add the theme toggle", "in_progress"),
                        ("Adapt the chart colours to dark backgrounds", "pending"),
                        ("Persist the theme choice", "pending"),
                    ),
                    bash("npm test -- settings"),
                    todos(
                        ("Add the theme toggle", "completed"),
                        ("Adapt the chart colours to dark backgrounds", "in_progress"),
                        ("Persist the theme choice", "pending"),
                    ),
                    final(
                        "I've added the theme toggle to the settings page. Let me now adapt "
                        "the chart colours for dark backgrounds."
                    ),
                ),
            ),
        ),
        Truth(
            open_tasks=("Adapt the chart colours to dark backgrounds", "Persist the theme choice"),
            outcome="stopped",
            doing="adapt the chart colours",
            prompt=(),
        ),
        tools="todo",
    ),
    Session(
        "wd-07",
        "web-dashboard",
        50.0,
        (
            boilerplate(),
            Turn(
                "Continue the dark mode work",
                (
                    todos(
                        ("Adapt the chart colours to dark backgrounds", "completed"),
                        ("Persist the theme choice", "completed"),
                    ),
                    final("Dark mode is complete: chart colours adapt and the choice persists."),
                ),
                minute=1,
                how="continue",
            ),
        ),
        Truth(
            closes=(
                ("wd-06", "Adapt the chart colours to dark backgrounds"),
                ("wd-06", "Persist the theme choice"),
            ),
            start=("wd-06",),
            prompt=("wd-06",),
        ),
        tools="todo",
    ),
    Session(
        "wd-08",
        "web-dashboard",
        65.0,
        (
            boilerplate(),
            Turn(
                "Check the dark mode contrast on the charts page",
                (bash("npm run lint:a11y"), final("Contrast passes on the charts page.")),
                minute=1,
                how="continue",
            ),
        ),
        Truth(start=("wd-07",), prompt=("wd-07",)),
        tools="todo",
    ),
    # ------------------------------------------------------------------ infra-scripts
    Session(
        "in-01",
        "infra-scripts",
        2.0,
        (
            Turn(
                "Write a backup script for the Postgres volumes with a seven-day rotation",
                (
                    Step(
                        tool="Write",
                        input={
                            "file_path": "scripts/backup_pg.sh",
                            "content": "#!/bin/sh\n# keep seven daily copies\n",
                        },
                    ),
                    bash("sh scripts/backup_pg.sh --dry-run"),
                    final("The backup script is written and a dry run works."),
                ),
            ),
            Turn("/compact", minute=20),
            Turn(
                "Add the rotation test",
                (
                    bash("bats tests/backup_rotation.bats"),
                    final("Added a rotation test: eight daily copies leave seven."),
                ),
                minute=25,
                how="continue",
            ),
        ),
        Truth(resumed=True),
        tools="",
        compact_summary=COMPACT_SUMMARY,
    ),
    Session(
        "in-02",
        "infra-scripts",
        6.0,
        (
            Turn(
                "Audit the cron jobs for overlapping schedules",
                (
                    Step(
                        tool="Agent",
                        input={
                            "description": "audit cron",
                            "prompt": "List every cron job and find schedules that overlap",
                            "subagent_type": "general-purpose",
                            "run_in_background": True,
                        },
                    ),
                    final("Started the cron audit in the background."),
                ),
            ),
        ),
        Truth(turns=2, prompt=()),
        tools="",
        subagents={
            "List every cron job and find schedules that overlap": (
                bash("crontab -l"),
                final("Two jobs overlap at 02:00: backup and vacuum."),
            ),
            "<task-notification>": (
                final(
                    "The audit found two jobs overlapping at 02:00 (backup and vacuum); "
                    "moving vacuum to 03:30 removes the overlap."
                ),
            ),
        },
    ),
    Session(
        "in-03",
        "infra-scripts",
        20.0,
        (
            Turn(
                "Now schedule the backup script nightly",
                (
                    bash("crontab -l"),
                    final("The backup script runs nightly at 01:15 from the root crontab."),
                ),
            ),
        ),
        Truth(predecessor="in-01", prompt=("in-01",)),
        tools="",
        fork_of="in-01",
    ),
    Session(
        "in-04",
        "infra-scripts",
        32.0,
        (
            Turn(
                "Rotate the TLS certificates on the staging proxy. The admin login is "
                "password=Tr0ub4dor-staging-77 if you need it.",
                (
                    bash("ls /etc/nginx/certs"),
                    bash("openssl x509 -in /etc/nginx/certs/staging.pem -noout -enddate"),
                    final(
                        "The new certificates are in /etc/nginx/certs. Let me check that the "
                        "proxy reloads with them next."
                    ),
                ),
            ),
        ),
        Truth(outcome="stopped", doing="proxy reloads", prompt=()),
        tools="",
    ),
    Session(
        "in-05",
        "infra-scripts",
        55.0,
        (
            Turn(
                "What is left on the staging certificates?",
                (
                    bash("systemctl reload nginx"),
                    final("Reloaded the proxy; it serves the new staging certificates."),
                ),
            ),
        ),
        Truth(prompt=("in-04",)),
        tools="",
    ),
    Session(
        "in-06",
        "infra-scripts",
        56.0,
        (Turn("history", (final("Recent work: backups, cron audit, certificates."),)),),
        Truth(prompt=()),
        tools="",
    ),
    Session(
        "in-07",
        "infra-scripts",
        57.0,
        (
            Turn(
                "Check disk usage on the build runners",
                (bash("df -h"), Step(status=502)),
            ),
        ),
        Truth(outcome="failed", prompt=()),
        tools="",
    ),
    Session(
        "in-08",
        "infra-scripts",
        66.0,
        (Turn("--history", (final("Nothing new since the disk check."),)),),
        Truth(prompt=()),
        tools="",
    ),
    # ------------------------------------------------------------------ mobile-app
    Session(
        "ma-01",
        "mobile-app",
        3.5,
        (
            Turn(
                "修复登录页面在弱网络下的超时问题，并添加重试机制",
                (
                    task("复现弱网下的登录超时"),
                    task("添加指数退避重试"),
                    task("更新错误提示文案"),
                    update(1, "completed"),
                    bash("npm test -- login"),
                    update(2, "completed"),
                    final(
                        "已添加指数退避重试，弱网下登录不再超时。接下来我会更新错误提示文案。",
                        think="计划：\n1. 复现问题\n2. 检查是否有其他未完成的实现\n3. 添加重试",
                    ),
                ),
            ),
        ),
        Truth(open_tasks=("更新错误提示文案",), outcome="stopped", doing="更新错误提示文案"),
    ),
    Session(
        "ma-02",
        "mobile-app",
        8.0,
        (
            Turn(
                "プッシュ通知の許可ダイアログが二回表示される不具合を直してください",
                (
                    task("二重表示の原因を調べる"),
                    bash("grep -rn requestPermission src/"),
                    update(1, "completed"),
                    final("修正しました。通知の許可確認をアプリ起動時の一回だけにしました。"),
                ),
            ),
        ),
        Truth(prompt=()),
    ),
    Session(
        "ma-03",
        "mobile-app",
        27.0,
        (
            Turn(
                "继续处理登录超时的错误提示文案",
                (
                    task("更新错误提示文案"),
                    update(1, "completed"),
                    final("错误提示文案已更新，并补充了中英文翻译。"),
                ),
            ),
        ),
        Truth(closes=(("ma-01", "更新错误提示文案"),), prompt=("ma-01",)),
    ),
    Session(
        "ma-04",
        "mobile-app",
        29.0,
        (
            Turn(
                "プッシュ通知の許可ダイアログの件、Android 12 でも確認してください",
                (
                    bash("adb shell getprop ro.build.version.release"),
                    final("Android 12 でも一回だけ表示されます。"),
                ),
            ),
        ),
        Truth(prompt=("ma-02",)),
    ),
    Session(
        "ma-05",
        "mobile-app",
        31.0,
        (
            Turn(
                "Bump React Native to 0.76 and fix the build",
                (
                    task("Bump react-native and the template files"),
                    task("Fix the iOS pod install errors"),
                    task("Fix the Android Gradle plugin version"),
                    update(1, "completed"),
                    bash("cd ios && pod install"),
                    final(
                        "React Native is at 0.76 in package.json and the templates are "
                        "updated. Now let me fix the remaining iOS pod errors."
                    ),
                ),
            ),
        ),
        Truth(
            open_tasks=("Fix the iOS pod install errors", "Fix the Android Gradle plugin version"),
            outcome="stopped",
            doing="iOS pod errors",
            prompt=(),
        ),
    ),
    Session(
        "ma-06",
        "mobile-app",
        60.0,
        (
            Turn(
                "continue the React Native upgrade",
                (
                    task("Fix the iOS pod install errors"),
                    update(1, "completed"),
                    final(
                        "The iOS pods install cleanly on 0.76. "
                        "Remaining: the Android Gradle plugin version."
                    ),
                ),
            ),
        ),
        Truth(
            closes=(("ma-05", "Fix the iOS pod install errors"),),
            open_tasks=("the Android Gradle plugin version",),
            prompt=("ma-05",),
        ),
    ),
    Session(
        "ma-07",
        "mobile-app",
        64.0,
        (
            Turn(
                "React Native アップグレードの続きで、Android の Gradle プラグインを直してください",
                (
                    bash("./gradlew --version"),
                    final("Android Gradle プラグインを 8.6 に上げ、ビルドが通りました。"),
                ),
            ),
        ),
        Truth(
            closes=(
                ("ma-06", "the Android Gradle plugin version"),
                ("ma-05", "Fix the Android Gradle plugin version"),
            ),
            prompt=("ma-06", "ma-05"),
        ),
    ),
    # ------------------------------------------------------------------ data-pipeline
    Session(
        "dp-01",
        "data-pipeline",
        5.5,
        (
            Turn(
                "Profile the nightly ETL job and write a report of where the time goes",
                (
                    bash("python -m etl.profile --nights 8"),
                    bash("python -m etl.run --dry-run --join hash"),
                    final(long_report()),
                ),
            ),
        ),
        Truth(open_tasks=("backfill the partition statistics",)),
        tools="",
    ),
    Session(
        "dp-02",
        "data-pipeline",
        9.5,
        (
            Turn(
                "Connect the pipeline to the warehouse. Use the service account key "
                "AKIAYS7BUZSBKMUIV3NR with secret "
                "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 for now.",
                (
                    bash("python -m etl.warehouse --check"),
                    final("The pipeline connects to the warehouse with the service account."),
                ),
            ),
        ),
        Truth(prompt=()),
        tools="",
    ),
    Session(
        "dp-03",
        "data-pipeline",
        24.0,
        (
            Turn(
                "Backfill the partition statistics mentioned in the ETL report",
                (
                    bash("python -m etl.stats --backfill --since 2026-01-01"),
                    final("Backfilled the partition statistics for every partition since January."),
                ),
            ),
        ),
        Truth(closes=(("dp-01", "backfill the partition statistics"),), prompt=("dp-01",)),
        tools="",
    ),
    Session(
        "dp-04",
        "data-pipeline",
        33.0,
        (
            boilerplate(),
            Turn(
                "Why did the last nightly run take longer than the others?",
                (
                    bash("python -m etl.profile --nights 1"),
                    final("The last run read twice as many partitions after the backfill."),
                ),
                minute=1,
                how="continue",
            ),
        ),
        Truth(start=("dp-03",), prompt=("dp-03",)),
        tools="",
    ),
    Session(
        "dp-05",
        "data-pipeline",
        58.0,
        (
            Turn(
                "The dedupe step ran out of memory last night",
                (
                    bash("grep -n 'MemoryError' logs/etl-nightly.log"),
                    final(
                        "The hash join in the dedupe step builds its table from the larger "
                        "side. Let me switch the build side to the smaller input and rerun."
                    ),
                ),
            ),
        ),
        Truth(outcome="stopped", doing="switch the build side", prompt=("dp-01",)),
        tools="",
    ),
    Session(
        "dp-06",
        "data-pipeline",
        62.0,
        (
            Turn(
                "把去重步骤的内存溢出问题修好，哈希连接要用较小的一侧建表",
                (
                    bash("python -m etl.run --dry-run"),
                    final("去重步骤改为用较小的一侧建哈希表，内存峰值降到 2.1 GB。"),
                ),
            ),
        ),
        Truth(prompt=("dp-05",)),
        tools="",
    ),
    # ------------------------------------------------------------------ harder cases
    Session(
        "ba-09",
        "billing-api",
        54.0,
        (
            Turn(
                "continue",
                (
                    bash("grep -n legacy payments/webhooks.py"),
                    final(
                        "The README links the webhook docs. One thing I noticed in the "
                        "handler:\n\n```python\n# TODO: remove the legacy signature path\n"
                        "if settings.LEGACY_SIGNATURES:\n    return legacy_verify(request)\n```\n\n"
                        "It is still reachable when the legacy flag is on."
                    ),
                ),
            ),
        ),
        Truth(start=("ba-08",), prompt=("ba-08",)),
    ),
    Session(
        "wd-09",
        "web-dashboard",
        67.0,
        (
            Turn(
                "The weekly usage chart shows zero actives for the enterprise plan",
                (
                    bash("npm test -- usage"),
                    final(
                        "The weekly actives query grouped by the plan name, and enterprise "
                        "accounts carry a plan id only; it now joins the plans table."
                    ),
                ),
            ),
        ),
        Truth(start=("wd-08",), prompt=("wd-05", "wd-03", "wd-01")),
        tools="todo",
    ),
)
