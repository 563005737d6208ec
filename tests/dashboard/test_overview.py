"""The overview's numbers and its server-drawn SVG charts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard import charts, presenters
from lifecycle.models import EventKind, SessionStatus
from sessionhub.models import Team
from tests.factories import AgentFactory, EventFactory, SessionFactory

pytestmark = pytest.mark.django_db


def test_counts_and_chart_data(member_client: Client, team: Team) -> None:
    now = timezone.now()
    busy = AgentFactory(team=team, name="busy-agent", project="/src/api")
    calm = AgentFactory(team=team, name="calm-agent", project="/src/web")
    SessionFactory(agent=busy, status=SessionStatus.ACTIVE, started_at=now - timedelta(minutes=5))
    SessionFactory(agent=busy, status=SessionStatus.SUSPENDED, started_at=now - timedelta(hours=1))
    SessionFactory(
        agent=busy,
        started_at=now - timedelta(days=1),
        ended_at=now - timedelta(days=1) + timedelta(seconds=30),
        compaction_count=2,
    )
    SessionFactory(
        agent=calm,
        status=SessionStatus.CRASHED,
        external_id="the-crashed-one",
        started_at=now - timedelta(days=2),
        ended_at=now - timedelta(days=2) + timedelta(hours=2),
        compaction_count=7,
    )
    SessionFactory(agent=calm, started_at=now - timedelta(days=40))  # outside the window
    session = SessionFactory(agent=calm, started_at=now - timedelta(hours=3))
    EventFactory.create_batch(3, session=session, kind=EventKind.PROMPT)

    response = member_client.get(reverse("dashboard:overview"))
    data = response.context["data"]
    assert data.counts["sessions"] == 5
    assert (data.counts["active"], data.counts["suspended"], data.counts["crashed"]) == (1, 1, 1)
    per_day, per_hour, durations, compactions = data.charts
    assert sum(int(row[-1]) for row in per_day.rows) == 5
    assert [row[0] for row in per_day.rows][-1] == timezone.localdate().strftime("%b %d")
    assert sum(int(row[1]) for row in per_hour.rows) == 3
    assert {row[0]: row[1] for row in durations.rows}["< 1 min"] == "1"
    assert {row[0]: row[1] for row in durations.rows}["1-4 h"] == "1"
    assert {row[0]: row[1] for row in compactions.rows} == {
        "0": "3",
        "1": "0",
        "2": "1",
        "3": "0",
        "4": "0",
        "5+": "1",
    }
    agents, projects = data.top
    assert [row[0] for row in agents.rows] == ["busy-agent", "calm-agent"]
    assert [row[0] for row in projects.rows] == ["/src/api", "/src/web"]
    assert [s.external_id for s in data.crashed] == ["the-crashed-one"]

    body = response.content.decode()
    assert body.count('<svg class="chart"') == 6
    assert 'role="img"' in body and "Show the numbers" in body
    assert (
        member_client.get(reverse("dashboard:overview"), {"days": "30"})
        .context["data"]
        .counts["sessions"]
        == 5
    )
    assert member_client.get(reverse("dashboard:overview"), {"days": "nope"}).status_code == 200


def test_charts_escape_labels_and_use_whole_number_gridlines() -> None:
    chart = charts.column_chart(
        title="<b>t</b>",
        labels=["<script>"],
        series=[charts.Series("a&b", [5], "c-0")],
    )
    assert "<script>" not in chart.svg and "&lt;script&gt;" in chart.svg
    assert "<b>" not in chart.svg
    assert ">2.5<" not in chart.svg  # 0..5 is drawn with whole-number gridlines
    assert charts.nice_ceiling(7) == 10 and charts.nice_ceiling(0) == 1
    assert charts.nice_ceiling(101) == 200
    bars = charts.bar_list(title="x", labels=['"quoted"'], values=[3], hrefs=['/a?"b'])
    assert '"quoted"' not in bars.svg and "&quot;b" in bars.svg


def test_overview_lists_duration_buckets_in_order() -> None:
    labels = [label for label, _, _ in presenters.DURATION_BUCKETS]
    assert labels[0] == "< 1 min" and labels[-1] == "> 1 day"
