"""Pictures drawn on the server as SVG: no chart library, nothing loaded from elsewhere.

A chart is data in, markup out; every text in it (title, axis labels, legend) comes in already
translated, and is escaped here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

__all__ = ["Bar", "Series", "Stack", "bar_chart", "stacked_chart"]


@dataclass(frozen=True, kw_only=True)
class Bar:
    label: str  # under the bar, e.g. "03:00 CET"
    total: int  # the whole bar: demand
    part: int  # the filled part: what can be served
    limit: int | None = None  # a mark across the bar: what the caps allow


WIDTH = 640
HEIGHT = 260
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 16, 56
LEGEND_LINE = 16
LEGEND_CHARS = 24  # what fits beside a legend's mark in a third of the width


def bar_chart(
    bars: Sequence[Bar],
    *,
    title: str,
    total_legend: str,
    part_legend: str,
    limit_legend: str,
    empty_text: str,
    number: Callable[[int], str] = str,
) -> Markup:
    """Bars of `total` with `part` filled and `limit` marked; `number` formats the axis numbers."""
    fmt = number
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    if not bars:
        out.append(
            f'<text x="{WIDTH // 2}" y="{HEIGHT // 2}" text-anchor="middle" class="chart-empty">'
            f"{escape(empty_text)}</text></svg>"
        )
        return Markup("".join(out))  # noqa: S704 - every text in it was escaped above
    top_value = max(max(b.total, b.limit or 0, 1) for b in bars)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    step = plot_w / len(bars)
    bar_w = max(4.0, min(48.0, step * 0.6))

    def y_of(value: int) -> float:
        return TOP + plot_h - plot_h * value / top_value

    for tick in (0, top_value // 2, top_value):
        y = y_of(tick)
        out.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" class="chart-grid"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="chart-axis">'
            f"{escape(fmt(tick))}</text>"
        )
    for i, bar in enumerate(bars):
        x = LEFT + step * i + (step - bar_w) / 2
        label = escape(f"{bar.label}: {fmt(bar.part)} / {fmt(bar.total)}")
        out.append(f"<g><title>{label}</title>")
        out.append(
            f'<rect x="{x:.1f}" y="{y_of(bar.total):.1f}" width="{bar_w:.1f}" '
            f'height="{y_of(0) - y_of(bar.total):.1f}" class="chart-total"/>'
        )
        out.append(
            f'<rect x="{x:.1f}" y="{y_of(bar.part):.1f}" width="{bar_w:.1f}" '
            f'height="{y_of(0) - y_of(bar.part):.1f}" class="chart-part"/>'
        )
        if bar.limit is not None:
            y = y_of(bar.limit)
            out.append(
                f'<line x1="{x - 4:.1f}" y1="{y:.1f}" x2="{x + bar_w + 4:.1f}" y2="{y:.1f}" '
                'class="chart-limit"/>'
            )
        out.append("</g>")
        if len(bars) <= 16 or i % max(1, len(bars) // 12) == 0:
            out.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
                f'class="chart-axis">{escape(bar.label)}</text>'
            )
    legend_y = HEIGHT - 14
    for offset, (css, text) in enumerate(
        (("chart-total", total_legend), ("chart-part", part_legend), ("chart-limit", limit_legend))
    ):
        x = LEFT + offset * 190
        shape = (
            f'<line x1="{x}" y1="{legend_y - 4}" x2="{x + 12}" y2="{legend_y - 4}" class="{css}"/>'
            if css == "chart-limit"
            else f'<rect x="{x}" y="{legend_y - 10}" width="12" height="10" class="{css}"/>'
        )
        out.append(
            f'{shape}<text x="{x + 18}" y="{legend_y}" class="chart-legend">{escape(text)}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))  # noqa: S704 - every text in it was escaped above


@dataclass(frozen=True, kw_only=True)
class Stack:
    label: str  # under the column, e.g. "03:00 CET" or a reason
    parts: tuple[int, ...]  # one count per series, bottom first


@dataclass(frozen=True, kw_only=True)
class Series:
    legend: str
    css: str  # the class that colours it (panel.css): the policy allows no inline style


def stacked_chart(
    stacks: Sequence[Stack],
    *,
    series: Sequence[Series],
    title: str,
    empty_text: str,
    limit: int | None = None,
    limit_legend: str | None = None,
    number: Callable[[int], str] = str,
) -> Markup:
    """Columns of `series` stacked bottom up, with `limit` marked across all of them."""
    fmt = number
    legends = [(one.css, one.legend) for one in series]
    if limit is not None and limit_legend:
        legends.append(("chart-limit", limit_legend))
    # Three short entries share a line, as in `bar_chart`; long ones (a reason in German) get a
    # line each, and the picture grows to hold them.
    per_line = 3 if all(len(text) <= LEGEND_CHARS for _, text in legends) else 1
    lines = -(-len(legends) // per_line)
    height = HEIGHT + LEGEND_LINE * (lines - 1)
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    if not stacks:
        out.append(
            f'<text x="{WIDTH // 2}" y="{HEIGHT // 2}" text-anchor="middle" class="chart-empty">'
            f"{escape(empty_text)}</text></svg>"
        )
        return Markup("".join(out))  # noqa: S704 - every text in it was escaped above
    top_value = max(max(sum(stack.parts), limit or 0, 1) for stack in stacks)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    step = plot_w / len(stacks)
    bar_w = max(2.0, min(48.0, step * 0.6))

    def y_of(value: int) -> float:
        return TOP + plot_h - plot_h * value / top_value

    for tick in (0, top_value // 2, top_value):
        y = y_of(tick)
        out.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" class="chart-grid"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="chart-axis">'
            f"{escape(fmt(tick))}</text>"
        )
    for i, stack in enumerate(stacks):
        x = LEFT + step * i + (step - bar_w) / 2
        told = ", ".join(
            f"{one.legend} {fmt(count)}" for one, count in zip(series, stack.parts, strict=True)
        )
        out.append(f"<g><title>{escape(f'{stack.label}: {told}')}</title>")
        below = 0
        for one, count in zip(series, stack.parts, strict=True):
            if count:
                out.append(
                    f'<rect x="{x:.1f}" y="{y_of(below + count):.1f}" width="{bar_w:.1f}" '
                    f'height="{y_of(below) - y_of(below + count):.1f}" class="{one.css}"/>'
                )
            below += count
        out.append("</g>")
        if len(stacks) <= 16 or i % max(1, len(stacks) // 12) == 0:
            out.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
                f'class="chart-axis">{escape(stack.label)}</text>'
            )
    if limit is not None:
        y = y_of(limit)
        out.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
            'class="chart-limit"/>'
        )
    for offset, (css, text) in enumerate(legends):
        x = LEFT + (offset % per_line) * 190
        legend_y = HEIGHT - 14 + (offset // per_line) * LEGEND_LINE
        shape = (
            f'<line x1="{x}" y1="{legend_y - 4}" x2="{x + 12}" y2="{legend_y - 4}" class="{css}"/>'
            if css == "chart-limit"
            else f'<rect x="{x}" y="{legend_y - 10}" width="12" height="10" class="{css}"/>'
        )
        out.append(
            f'{shape}<text x="{x + 18}" y="{legend_y}" class="chart-legend">{escape(text)}</text>'
        )
    out.append("</svg>")
    return Markup("".join(out))  # noqa: S704 - every text in it was escaped above
