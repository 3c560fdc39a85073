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
    out = _opening(title, HEIGHT)
    if not bars:
        return _empty(out, empty_text)
    scale = _Scale(max(max(b.total, b.limit or 0, 1) for b in bars), len(bars), min_width=4.0)
    out += _grid(scale, number)
    for i, bar in enumerate(bars):
        out += _bar(scale, i, bar, number)
        out += _column_label(scale, i, bar.label)
    legends = [
        ("chart-total", total_legend),
        ("chart-part", part_legend),
        ("chart-limit", limit_legend),
    ]
    out += _legend(legends, per_line=3)
    return _closed(out)


class _Scale:
    """Where values and columns go in the plot area."""

    def __init__(self, top_value: int, columns: int, *, min_width: float) -> None:
        self.top_value = top_value
        self.columns = columns
        self.plot_h = HEIGHT - TOP - BOTTOM
        self.step = (WIDTH - LEFT - RIGHT) / columns
        self.bar_w = max(min_width, min(48.0, self.step * 0.6))

    def y_of(self, value: int) -> float:
        return TOP + self.plot_h - self.plot_h * value / self.top_value

    def x_of(self, column: int) -> float:
        return LEFT + self.step * column + (self.step - self.bar_w) / 2


def _opening(title: str, height: int) -> list[str]:
    return [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]


def _closed(out: list[str]) -> Markup:
    out.append("</svg>")
    return Markup("".join(out))  # noqa: S704 - every text in it was escaped where it was added


def _empty(out: list[str], empty_text: str) -> Markup:
    out.append(
        f'<text x="{WIDTH // 2}" y="{HEIGHT // 2}" text-anchor="middle" class="chart-empty">'
        f"{escape(empty_text)}</text>"
    )
    return _closed(out)


def _grid(scale: _Scale, number: Callable[[int], str]) -> list[str]:
    """Three lines across the plot (zero, half, top), each with its number."""
    out = []
    for tick in (0, scale.top_value // 2, scale.top_value):
        y = scale.y_of(tick)
        out.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" class="chart-grid"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="chart-axis">'
            f"{escape(number(tick))}</text>"
        )
    return out


def _bar(scale: _Scale, column: int, bar: Bar, number: Callable[[int], str]) -> list[str]:
    x, y_of, bar_w = scale.x_of(column), scale.y_of, scale.bar_w
    label = escape(f"{bar.label}: {number(bar.part)} / {number(bar.total)}")
    out = [
        f"<g><title>{label}</title>",
        f'<rect x="{x:.1f}" y="{y_of(bar.total):.1f}" width="{bar_w:.1f}" '
        f'height="{y_of(0) - y_of(bar.total):.1f}" class="chart-total"/>',
        f'<rect x="{x:.1f}" y="{y_of(bar.part):.1f}" width="{bar_w:.1f}" '
        f'height="{y_of(0) - y_of(bar.part):.1f}" class="chart-part"/>',
    ]
    if bar.limit is not None:
        y = y_of(bar.limit)
        out.append(
            f'<line x1="{x - 4:.1f}" y1="{y:.1f}" x2="{x + bar_w + 4:.1f}" y2="{y:.1f}" '
            'class="chart-limit"/>'
        )
    out.append("</g>")
    return out


def _column_label(scale: _Scale, column: int, label: str) -> list[str]:
    """The column's label under it; with many columns, about a dozen of them."""
    if scale.columns > 16 and column % max(1, scale.columns // 12) != 0:
        return []
    x = scale.x_of(column) + scale.bar_w / 2
    return [
        f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
        f'class="chart-axis">{escape(label)}</text>'
    ]


def _legend(legends: Sequence[tuple[str, str]], *, per_line: int) -> list[str]:
    """Each (css, text) with its mark: a line for the limit, a box for the rest."""
    out = []
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
    return out


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
    legends = [(one.css, one.legend) for one in series]
    if limit is not None and limit_legend:
        legends.append(("chart-limit", limit_legend))
    # Three short entries share a line, as in `bar_chart`; long ones (a reason in German) get a
    # line each, and the picture grows to hold them.
    per_line = 3 if all(len(text) <= LEGEND_CHARS for _, text in legends) else 1
    lines = -(-len(legends) // per_line)
    out = _opening(title, HEIGHT + LEGEND_LINE * (lines - 1))
    if not stacks:
        return _empty(out, empty_text)
    top_value = max(max(sum(stack.parts), limit or 0, 1) for stack in stacks)
    scale = _Scale(top_value, len(stacks), min_width=2.0)
    out += _grid(scale, number)
    for i, stack in enumerate(stacks):
        out += _stack(scale, i, stack, series, number)
        out += _column_label(scale, i, stack.label)
    if limit is not None:
        y = scale.y_of(limit)
        out.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
            'class="chart-limit"/>'
        )
    out += _legend(legends, per_line=per_line)
    return _closed(out)


def _stack(
    scale: _Scale,
    column: int,
    stack: Stack,
    series: Sequence[Series],
    number: Callable[[int], str],
) -> list[str]:
    """One column: its parts bottom up (an empty part draws nothing), its counts in its title."""
    x, y_of = scale.x_of(column), scale.y_of
    told = ", ".join(
        f"{one.legend} {number(count)}" for one, count in zip(series, stack.parts, strict=True)
    )
    out = [f"<g><title>{escape(f'{stack.label}: {told}')}</title>"]
    below = 0
    for one, count in zip(series, stack.parts, strict=True):
        if count:
            out.append(
                f'<rect x="{x:.1f}" y="{y_of(below + count):.1f}" width="{scale.bar_w:.1f}" '
                f'height="{y_of(below) - y_of(below + count):.1f}" class="{one.css}"/>'
            )
        below += count
    out.append("</g>")
    return out
