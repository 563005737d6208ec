"""Charts drawn on the server as inline SVG: no chart library, no CDN, no JavaScript.

Each chart comes with the numbers it was drawn from, so the page can offer them as a
plain table (for screen readers, and for anyone who wants the exact figures). Colours
come from CSS classes, so the stylesheet decides them (and their dark-mode variants).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from itertools import count

from django.utils.safestring import SafeString, mark_safe

_ids = count(1)

WIDTH = 640
HEIGHT = 220
LEFT = 40
RIGHT = 8
TOP = 12
BOTTOM = 30


@dataclass(frozen=True)
class Series:
    """One named run of values; ``css`` is the class that colours it."""

    name: str
    values: Sequence[float]
    css: str = "c-0"


@dataclass
class Chart:
    """A rendered chart and the table of what it shows."""

    title: str
    svg: SafeString
    head: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    legend: list[Series] = field(default_factory=list)
    empty: bool = False


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1
    power: float = 10 ** math.floor(math.log10(value))  # an int from 1 up: whole ticks
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power  # pragma: no cover - the loop always returns


def _ticks(top: float) -> list[float]:
    """Gridline positions (fractions of ``top``) that fall on whole numbers."""
    for parts in (4, 5, 2):
        if float(top / parts).is_integer():
            return [i / parts for i in range(parts + 1)]
    return [0.0, 1.0]


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _compact(value: float) -> str:
    """An axis figure short enough for the axis: 250k, 1.5M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(value) >= size:
            scaled = value / (size if size != 1e4 else 1e3)
            return f"{scaled:,.1f}".rstrip("0").rstrip(".") + suffix
    return _number(value)


def _frame(chart_id: str, title: str, body: list[str], height: int = HEIGHT) -> SafeString:
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-labelledby="{chart_id}-t" preserveAspectRatio="xMidYMid meet">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        *body,
        "</svg>",
    ]
    return mark_safe("".join(parts))  # noqa: S308 - every text above went through escape()


def column_chart(
    *, title: str, labels: Sequence[str], series: Sequence[Series], unit: str = ""
) -> Chart:
    """Stacked columns, one per label; each series a colour."""
    chart_id = f"chart{next(_ids)}"
    n = len(labels)
    totals = [sum(s.values[i] for s in series) for i in range(n)]
    top = nice_ceiling(max(totals, default=0))
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    body: list[str] = []
    for fraction in _ticks(top):
        y = TOP + plot_h * (1 - fraction)
        body.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_compact(top * fraction)}</text>"
        )
    if n:
        slot = plot_w / n
        bar_w = max(1.0, slot * 0.72)
        every = max(1, math.ceil(n / 12))
        for i, label in enumerate(labels):
            x = LEFT + i * slot + (slot - bar_w) / 2
            base: float = TOP + plot_h
            parts = [f"{escape(label)}: {_number(totals[i])}{unit}"]
            for s in series:
                value = s.values[i]
                if value <= 0:
                    continue
                h = plot_h * value / top
                base -= h
                parts.append(f"{escape(s.name)} {_number(value)}")
                body.append(
                    f'<rect class="{s.css}" x="{x:.1f}" y="{base:.1f}" '
                    f'width="{bar_w:.1f}" height="{h:.1f}">'
                    f"<title>{escape(label)} · {escape(s.name)}: {_number(value)}{unit}</title>"
                    "</rect>"
                )
            if i % every == 0:
                # Every other label is "alt": a narrow screen, which draws the chart
                # smaller and its labels larger (the stylesheet), shows half of them.
                alt = " alt" if (i // every) % 2 else ""
                body.append(
                    f'<text class="axis x{alt}" x="{x + bar_w / 2:.1f}" y="{HEIGHT - 10}" '
                    f'text-anchor="middle">{escape(label)}</text>'
                )
    head = ["", *[s.name for s in series]] + (["total"] if len(series) > 1 else [])
    rows = []
    for i, label in enumerate(labels):
        row = [label, *[_number(s.values[i]) for s in series]]
        if len(series) > 1:
            row.append(_number(totals[i]))
        rows.append(row)
    return Chart(
        title=title,
        svg=_frame(chart_id, title, body),
        head=head,
        rows=rows,
        legend=list(series) if len(series) > 1 else [],
        empty=not any(totals),
    )


def bar_list(
    *,
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    hrefs: Sequence[str | None] | None = None,
    css: str = "c-0",
) -> Chart:
    """Horizontal bars, one row per label, longest first as given."""
    chart_id = f"chart{next(_ids)}"
    row_h = 26
    height = max(row_h, row_h * len(labels)) + 6
    label_w = 230
    plot_w = WIDTH - label_w - 60
    top = max(values, default=0) or 1
    body: list[str] = []
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = 4 + i * row_h
        short = label if len(label) <= 34 else "…" + label[-33:]
        w = max(2.0, plot_w * value / top)
        text = (
            f'<text class="label" x="{label_w - 8}" y="{y + 16}" text-anchor="end">'
            f"{escape(short)}</text>"
        )
        href = hrefs[i] if hrefs else None
        if href:
            text = f'<a href="{escape(href)}">{text}</a>'
        body.append(
            text + f'<rect class="{css}" x="{label_w}" y="{y + 3}" width="{w:.1f}" '
            f'height="{row_h - 8}" rx="2"><title>{escape(label)}: {_number(value)}</title></rect>'
            f'<text class="axis" x="{label_w + w + 6:.1f}" y="{y + 16}">{_number(value)}</text>'
        )
    return Chart(
        title=title,
        svg=_frame(chart_id, title, body, height=height),
        head=["", "sessions"],
        rows=[[label, _number(v)] for label, v in zip(labels, values, strict=True)],
        empty=not labels,
    )


def session_strip(
    *,
    start: float,
    end: float,
    sleeps: Sequence[tuple[float, float]],
    marks: Sequence[tuple[float, str, str]],
) -> SafeString:
    """A session's life as one horizontal band: asleep stretches shaded, events as ticks.

    Times are seconds from the start; ``marks`` are ``(seconds, css class, title)``.
    """
    chart_id = f"strip{next(_ids)}"
    height = 44
    span = max(end - start, 1.0)
    left, width = 4, WIDTH - 8

    def x(t: float) -> float:
        return left + width * min(max(t - start, 0), span) / span

    body = [f'<rect class="strip-awake" x="{left}" y="12" width="{width}" height="20" rx="3"/>']
    for a, b in sleeps:
        body.append(
            f'<rect class="strip-asleep" x="{x(a):.1f}" y="12" width="{max(2, x(b) - x(a)):.1f}" '
            f'height="20"><title>suspended</title></rect>'
        )
    for t, css, title in marks:
        body.append(
            f'<rect class="{css}" x="{x(t) - 1:.1f}" y="8" width="3" height="28">'
            f"<title>{escape(title)}</title></rect>"
        )
    return _frame(chart_id, "The session over time", body, height=height)
