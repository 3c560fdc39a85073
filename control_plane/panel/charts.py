"""Pictures drawn on the server as SVG: no chart library, nothing loaded from elsewhere.

A chart is data in, markup out; every text in it (title, axis labels, legend) comes in already
translated, and is escaped here. Texts are placed by an estimated width (`text_width`), so a
legend entry or a column label gets its own room in any of the nine languages: legend entries
side by side while they fit, else on the next line (the picture grows to hold them); a column
label too wide for its column is broken at its spaces and slashes, else only every n-th one is
shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from math import ceil

from markupsafe import Markup

__all__ = ["Bar", "Series", "Stack", "bar_chart", "stacked_chart"]


@dataclass(frozen=True, kw_only=True)
class Bar:
    label: str  # under the bar, e.g. "03:00 CET"
    total: int  # the whole bar: demand
    part: int  # the filled part: what can be served
    limit: int | None = None  # a mark across the bar: what the caps allow


WIDTH = 640
HEIGHT = 260  # of a picture with nothing to show
LEFT, RIGHT, TOP = 48, 12, 16
PLOT_HEIGHT = 188
FONT = 12  # px: what panel.css gives the picture's texts
# The server knows no font metrics, so a text is taken as wide as its characters at 0.68 em
# each: more than the average letter of the usual sans-serif faces (about 0.55 em), so each
# legend entry and axis label gets room for its wording in any of the nine languages.
EM_PER_CHAR = 0.68
LINE = 18  # from one line of text to the next: more than a 12 px text's box (about 14 px)
GAP = 20  # between two texts side by side
MARK = 18  # a legend's mark and the space after it


def text_width(text: str) -> float:
    """The room `text` is given on a line of the picture."""
    return len(text) * FONT * EM_PER_CHAR


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
    if not bars:
        return _empty(title, empty_text)
    top_value = max(max(b.total, b.limit or 0, 1) for b in bars)
    scale = _Scale(top_value, len(bars), min_width=4.0, number=number)
    out = _grid(scale, number)
    for i, bar in enumerate(bars):
        out += _bar(scale, i, bar, number)
    legends = [
        ("chart-total", total_legend),
        ("chart-part", part_legend),
        ("chart-limit", limit_legend),
    ]
    return _picture(title, out, [bar.label for bar in bars], legends, scale)


class _Scale:
    """Where values and columns go in the plot area: right of the widest axis number."""

    def __init__(
        self, top_value: int, columns: int, *, min_width: float, number: Callable[[int], str]
    ) -> None:
        self.top_value = top_value
        self.columns = columns
        self.ticks = (0, top_value // 2, top_value)
        self.left = max(LEFT, max(text_width(number(tick)) for tick in self.ticks) + 10)
        self.step = (WIDTH - self.left - RIGHT) / columns
        self.bar_w = max(min_width, min(48.0, self.step * 0.6))

    def y_of(self, value: int) -> float:
        return TOP + PLOT_HEIGHT - PLOT_HEIGHT * value / self.top_value

    def x_of(self, column: int) -> float:
        return self.left + self.step * column + (self.step - self.bar_w) / 2


# The zero's number sits on the plot's floor; the columns' labels a line below it, the legend
# below them: no text shares a line with another one's box.
ZERO_BASELINE = TOP + PLOT_HEIGHT + 4
LABEL_BASELINE = ZERO_BASELINE + LINE
LEGEND_BASELINE = LABEL_BASELINE + LINE + 6


def _opening(title: str, height: float) -> list[str]:
    return [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]


def _closed(out: list[str]) -> Markup:
    out.append("</svg>")
    return Markup("".join(out))  # noqa: S704 - every text in it was escaped where it was added


def _empty(title: str, empty_text: str) -> Markup:
    out = _opening(title, HEIGHT)
    out.append(
        f'<text x="{WIDTH // 2}" y="{HEIGHT // 2}" text-anchor="middle" class="chart-empty">'
        f"{escape(empty_text)}</text>"
    )
    return _closed(out)


def _picture(
    title: str,
    drawn: list[str],
    labels: Sequence[str],
    legends: Sequence[tuple[str, str]],
    scale: _Scale,
) -> Markup:
    """The drawn plot, the columns' labels under it and the legend below them, the picture as
    tall as they need."""
    placed, label_lines = _column_labels(scale, labels)
    legend, last_baseline = _legend(
        legends, left=scale.left, baseline=LEGEND_BASELINE + (label_lines - 1) * LINE
    )
    return _closed(_opening(title, last_baseline + 10) + drawn + placed + legend)


def _grid(scale: _Scale, number: Callable[[int], str]) -> list[str]:
    """Three lines across the plot (zero, half, top), each with its number."""
    out = []
    for tick in scale.ticks:
        y = scale.y_of(tick)
        out.append(
            f'<line x1="{scale.left:.1f}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
            'class="chart-grid"/>'
        )
        out.append(
            f'<text x="{scale.left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end" '
            f'class="chart-axis">{escape(number(tick))}</text>'
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


def _column_labels(scale: _Scale, labels: Sequence[str]) -> tuple[list[str], int]:
    """The columns' labels under them, and how many lines they take. A label wider than its
    column is broken at its spaces and slashes (a pair: "stable/" over "linux-x86_64") when its
    pieces then fit, in at most three lines; else only every `stride`-th label is shown, the
    stride wide enough for the longest one, as on a time axis (each column's own label is in its
    title)."""
    room = scale.step - GAP
    broken = [_broken(label, room) for label in labels]
    if all(len(lines) <= 3 and max(map(text_width, lines)) <= room for lines in broken):
        stride = 1
    else:
        broken = [[label] for label in labels]
        widest = max(text_width(label) for label in labels)
        stride = max(1, ceil((widest + GAP) / scale.step))
    out = []
    for column in range(0, len(labels), stride):
        x = scale.x_of(column) + scale.bar_w / 2
        half = max(map(text_width, broken[column])) / 2
        if x - half < 0 or x + half > WIDTH:
            continue
        for offset, line in enumerate(broken[column]):
            out.append(
                f'<text x="{x:.1f}" y="{LABEL_BASELINE + offset * LINE}" text-anchor="middle" '
                f'class="chart-axis">{escape(line)}</text>'
            )
    return out, max(len(lines) for lines in broken)


def _legend(
    legends: Sequence[tuple[str, str]], *, left: float, baseline: float
) -> tuple[list[str], float]:
    """Each (css, text) with its mark (a line for the limit, a box for the rest), side by side
    while they fit in the width, else on the next line; a text longer than a whole line is
    broken at its spaces. Also where the last line's baseline is."""
    out: list[str] = []
    room = WIDTH - RIGHT - left
    x, last = left, baseline
    for css, text in legends:
        lines = _broken(text, room - MARK)
        width = MARK + max(text_width(line) for line in lines)
        if x > left and x + width > WIDTH - RIGHT:
            x, baseline = left, baseline + LINE
        out.append(
            f'<line x1="{x:.1f}" y1="{baseline - 4}" x2="{x + 12:.1f}" y2="{baseline - 4}" '
            f'class="{css}"/>'
            if css == "chart-limit"
            else f'<rect x="{x:.1f}" y="{baseline - 10}" width="12" height="10" class="{css}"/>'
        )
        for offset, line in enumerate(lines):
            out.append(
                f'<text x="{x + MARK:.1f}" y="{baseline + offset * LINE}" class="chart-legend">'
                f"{escape(line)}</text>"
            )
        last = baseline + (len(lines) - 1) * LINE
        if len(lines) > 1:
            x, baseline = left, last + LINE
        else:
            x += width + GAP
    return out, last


def _broken(text: str, room: float) -> list[str]:
    """`text` in lines that each fit in `room`, broken at spaces and after slashes (a word longer
    than the room stays whole: nothing better can be done without hyphenation rules per
    language)."""
    lines: list[str] = []
    for piece in _PIECES.findall(text):
        if lines and text_width((lines[-1] + piece).rstrip()) <= room:
            lines[-1] += piece
        else:
            lines.append(piece)
    return [line.rstrip() for line in lines] or [text]


# A word with the space after it, or a part of a word up to and with a slash.
_PIECES = re.compile(r"[^\s/]*/|[^\s/]+\s*")


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
    if not stacks:
        return _empty(title, empty_text)
    top_value = max(max(sum(stack.parts), limit or 0, 1) for stack in stacks)
    scale = _Scale(top_value, len(stacks), min_width=2.0, number=number)
    out = _grid(scale, number)
    for i, stack in enumerate(stacks):
        out += _stack(scale, i, stack, series, number)
    if limit is not None:
        y = scale.y_of(limit)
        out.append(
            f'<line x1="{scale.left:.1f}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
            'class="chart-limit"/>'
        )
    return _picture(title, out, [stack.label for stack in stacks], legends, scale)


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
