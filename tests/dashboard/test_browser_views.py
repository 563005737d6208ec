"""Views per developer and per project, and the overview's tokens and cost, in a real
browser (Playwright + Debian's Chromium) against a live server fed over HTTP.

Two developers' Claude Code sessions: alice's client reports ``alice@laptop``, bob's
reports nobody (his token's name stands for him). Each ``Stop`` carries the turn's usage
as the hook client sends it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.utils import timezone

from lifecycle.models import Session
from memory.models import LlmUsage
from sessionhub.models import Team
from tests.conftest import claude_code_hooks
from tests.dashboard import test_browser
from tests.dashboard.test_browser import log_in, replay, shot
from tests.factories import MembershipFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The browser and page fixtures of the dashboard's browser tests.
browser = test_browser.browser
page = test_browser.page

USAGE = {"input": 1000, "output": 2000, "cache_read": 30000, "cache_write": 4000}
# claude-opus-4 in the default price table: 15, 75, 1.5 and 18.75 USD per million.
STOP_COST = (1000 * 15 + 2000 * 75 + 30000 * 1.5 + 4000 * 18.75) / 1_000_000
ALICE = {"basic": "ledger-sync", "crash": "storefront"}
BOB = {"secrets": "storefront", "compact": "push-relay"}


def lines_of(scenario: str, developer: str = "") -> list[dict[str, Any]]:
    """The scenario's hooks as the hook client posts them: usage on each Stop."""
    out = []
    for line in claude_code_hooks(scenario):
        line = copy.deepcopy(line)
        extra: dict[str, Any] = {}
        if developer:
            extra["developer"] = developer
        if line["hook_event_name"] == "Stop":
            extra["usage"] = {**USAGE, "model": "claude-opus-4-1"}
        if extra:
            line["sessionhub"] = extra
        out.append(line)
    return out


@pytest.fixture
def views(live_server: Any, team: Team, make_token: Any, settings: Any) -> dict[str, Any]:
    llm = dict(settings.SESSIONHUB["LLM"], MODEL="gpt-4o-mini")
    settings.SESSIONHUB = {**settings.SESSIONHUB, "LLM": llm}
    alice_token = make_token(team, name="alice-token")[1]
    bob_token = make_token(team, name="bob-desktop")[1]
    stops = 0
    for scenario in ALICE:
        lines = lines_of(scenario, "alice@laptop")
        replay(live_server, alice_token, "hooks/claude-code", lines)
        stops += sum(1 for x in lines if x["hook_event_name"] == "Stop")
    for scenario in BOB:
        lines = lines_of(scenario)
        replay(live_server, bob_token, "hooks/claude-code", lines)
        stops += sum(1 for x in lines if x["hook_event_name"] == "Stop")
    LlmUsage.objects.create(team=team, day=timezone.localdate(), tokens=50_000, calls=3)
    MembershipFactory(team=team, user=UserFactory(username="lead"))
    return {"stops": stops}


def listed(page: Any) -> set[str]:
    """The external ids of the sessions the list shows."""
    rows = page.locator("table.sessions tbody tr")
    return {
        Session.objects.get(pk=rows.nth(i).get_attribute("data-session-id")).external_id
        for i in range(rows.count())
    }


def ids(*scenarios: str) -> set[str]:
    return {claude_code_hooks(s)[0]["session_id"] for s in scenarios}


def test_session_list_by_developer_and_by_project(page: Any, live_server: Any, views: Any) -> None:
    log_in(page, live_server, "lead", "/sessions/")
    assert listed(page) == ids("basic", "crash", "secrets", "compact")

    page.get_by_label("Developer").select_option("alice@laptop")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**developer=alice%40laptop**")
    assert listed(page) == ids("basic", "crash")
    assert page.locator("td.developer").all_inner_texts() == ["alice@laptop"] * 2

    page.get_by_label("Developer").select_option("")
    page.get_by_label("Project").select_option(label="/home/maya/work/storefront")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**project=**")
    assert listed(page) == ids("crash", "secrets")
    assert sorted(page.locator("td.developer").all_inner_texts()) == [
        "alice@laptop",
        "bob-desktop",
    ]

    page.get_by_label("Developer").select_option("bob-desktop")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_load_state()
    assert listed(page) == ids("secrets")
    shot(page, "sessions-by-developer-and-project")

    # The agents page groups by project and names agents as the project reads.
    page.goto(f"{live_server.url}/agents/?project=/home/maya/work/storefront")
    names = page.locator("table.agents tbody tr td:first-child a").all_inner_texts()
    assert sorted(names) == ["storefront · alice@laptop", "storefront · bob-desktop"]

    # On a 390 px phone the list reads as cards: nothing scrolls sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/sessions/")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    assert page.locator("table.sessions thead").bounding_box()["height"] <= 1
    # ...nor does the list inside its own box.
    inner = page.evaluate(
        "[...document.querySelectorAll('.table-wrap')].map(w => w.scrollWidth - w.clientWidth)"
    )
    assert max(inner) <= 1, inner
    shot(page, "sessions-phone")


def test_overview_tokens_and_cost_chart(page: Any, live_server: Any, views: Any) -> None:
    log_in(page, live_server, "lead", "/")
    usage = page.locator("section.tokens-cost")
    total = sum(USAGE.values()) * views["stops"]
    assert usage.locator("[data-tokens=tokens]").inner_text() == f"{total:,}"
    cost = STOP_COST * views["stops"]
    assert usage.locator("[data-tokens=cost]").inner_text() == f"${cost:.2f}"
    assert usage.locator("[data-tokens=summaries]").inner_text() == "50,000"
    assert "gpt-4o-mini" in usage.inner_text()

    charts = usage.locator("figure.chart-card")
    token_chart = charts.filter(has_text="Tokens per day")
    cost_chart = charts.filter(has_text="Estimated cost per day")
    # The bars are drawn: today's column holds each kind of token.
    bars = token_chart.locator("svg rect title").all_text_contents()
    today = timezone.localdate().strftime("%b %d")
    assert f"{today} · output: {2000 * views['stops']:,}" in bars
    assert f"{today} · cache reads: {30000 * views['stops']:,}" in bars
    token_chart.get_by_text("Show the numbers").click()
    row = token_chart.locator("tbody tr", has_text=today)
    assert row.locator("td").last.inner_text() == f"{total:,}"
    cost_bars = cost_chart.locator("svg rect title").all_text_contents()
    assert any(t.startswith(f"{today} · agents: {cost:.1f}") for t in cost_bars), cost_bars
    assert "SessionHub summaries" in cost_chart.locator(".legend").inner_text()
    shot(page, "overview-tokens-and-cost")

    # One developer's share: bob's two sessions only, and no summaries line.
    page.get_by_label("Developer", exact=True).select_option("bob-desktop")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**developer=bob-desktop**")
    bob_stops = sum(1 for s in BOB for x in claude_code_hooks(s) if x["hook_event_name"] == "Stop")
    assert page.locator("[data-tokens=tokens]").inner_text() == (
        f"{sum(USAGE.values()) * bob_stops:,}"
    )
    assert page.locator("[data-tokens=summaries]").count() == 0

    # On a phone the charts' labels stay readable: drawn at least 9 px high.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    heights = page.evaluate(
        "[...document.querySelectorAll('svg.chart text.axis')]"
        ".filter(t => getComputedStyle(t).display !== 'none')"
        ".map(t => t.getBoundingClientRect().height)"
    )
    assert heights and min(heights) >= 9, heights
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1360, "height": 900})
    page.reload()
    by_project = page.locator("section.tokens-table", has_text="Tokens by project")
    assert sorted(by_project.locator("tbody th").all_inner_texts()) == [
        "/home/maya/work/push-relay",
        "/home/maya/work/storefront",
    ]
