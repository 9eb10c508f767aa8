"""The dashboard's own widgets: a value tile, the window plot, the per-position bars, header packing, the help.

Each shows whole words or nothing: a tile picks the longest of its wordings that fits
its width, the header wraps between parts, never inside one, so a small terminal shows
less rather than everything cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot

Wording = tuple[str, str]
"""(title, line under the value) of a tile."""


def fit(choices: Sequence[str], width: int) -> str:
    """The first (longest) choice no wider than ``width``, else the last (shortest)."""
    return next((c for c in choices if len(c) <= width), choices[-1])


def pack(parts: Sequence[tuple[str, str]], width: int, sep: str = "  ") -> Text:
    """(text, style) parts on as few lines as fit ``width``, breaking between parts only."""
    text, used = Text(), 0
    for part, style in parts:
        if used and used + len(sep) + len(part) > width:
            text.append("\n")
            used = 0
        elif used:
            text.append(sep)
            used += len(sep)
        text.append(part, style=style)
        used += len(part)
    return text


class Tile(Static):
    """A big number with a title and a smaller line under it, in the longest wording that fits."""

    def __init__(self, title: str, *, id: str) -> None:
        super().__init__("-", id=id)
        self.border_title = title
        self._value = "-"
        self._wordings: Sequence[Wording] = ((title, ""),)

    def show(self, value: str, wordings: Sequence[Wording], health: str = "none") -> None:
        self._value, self._wordings = value, wordings
        self._fit()
        for h in ("good", "warn", "bad", "none"):
            self.set_class(h == health, f"-{h}")

    def on_resize(self) -> None:
        self._fit()

    def wording(self) -> Wording:
        """The first wording whose title and sub-line (one or more lines) fit the tile (the first before layout)."""
        width, rows = self.content_size.width or 10**6, (self.content_size.height or 10**6) - 1
        titles = self.size.width - 6 if self.size.width else 10**6  # "╭─ title ─╮"

        def fits(w: Wording) -> bool:
            lines = w[1].split("\n")
            return len(w[0]) <= titles and len(lines) <= rows and max(map(len, lines)) <= width

        return next((w for w in self._wordings if fits(w)), self._wordings[-1])

    def _fit(self) -> None:
        title, sub = self.wording()
        self.border_title = title
        self.update(Text.assemble((self._value, "bold"), "\n", (sub, "dim")))


class WindowPlot(PlotextPlot):
    """One series over the window in log time, with the previous run's mean as a red reference line."""

    _drawn: tuple[Sequence[tuple[float, float]], Sequence[str], float | None, str] | None = None
    Y_LABELS = 10
    """Columns a title leaves for the y tick labels: plotext centres it on the canvas right of them, or drops it."""

    def on_resize(self) -> None:
        if self._drawn is not None:
            self.draw(*self._drawn)  # the title that fits depends on the width (the position bars come and go)

    def draw(
        self, series: Sequence[tuple[float, float]], titles: Sequence[str], ref: float | None, xlabel: str
    ) -> None:
        """``titles``: longest first; the first that fits is shown (plotext drops a title too long for its width)."""
        self._drawn = (series, titles, ref, xlabel)
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(fit(titles, (self.content_size.width or 10**6) - self.Y_LABELS))
        plt.xlabel(xlabel)
        plt.frame(False)  # no box: its top and bottom lines would cost two of a short screen's rows
        plt.yaxes(True, False)
        if series:
            xs = [x for x, _ in series]
            ys = [y for _, y in series]
            plt.plot(xs, ys, marker="braille", color="cyan")
            lo, hi = min(ys), max(ys)
            if ref is not None:
                lo, hi = min(lo, ref), max(hi, ref)
            pad = max(0.05 * (hi - lo), 0.1 if hi < 10 else 1.0)
            plt.ylim(max(0.0, lo - pad), hi + pad)
            plt.xlim(0, max(xs[-1], 1.0))
        if ref is not None:
            plt.hline(ref, color="red")
        self.refresh()


class Position(Protocol):
    """One bar (an ``acceptmon.tui.view.Position``): draft position, the run's acceptance, the latest interval's."""

    @property
    def position(self) -> int: ...

    @property
    def mean(self) -> float | None: ...

    @property
    def last(self) -> float | None: ...


EIGHTHS = " ▏▎▍▌▋▊▉"
LEGENDS = ("█ run ┃ last", "█run ┃last", "")
"""The bars' legend, longest first: the bar is this run's mean, the tick the latest interval."""


class PositionBars(Static):
    """Per draft position, a bar of the run's acceptance and a tick at the latest interval's, with both numbers.

    Lines are whole: with too few rows the legend goes first, then the last positions (a line says how many).
    """

    def __init__(self, *, id: str) -> None:
        super().__init__("", id=id)
        self.border_title = "accepted by position"
        self._bars: Sequence[Position] = ()

    def show(self, bars: Sequence[Position]) -> None:
        self._bars = bars
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def lines(self) -> list[Text]:
        """What the widget shows at its current size."""
        width, rows = self.content_size.width or 30, self._room()
        span = max(4, width - 13)  # "NN " + bar + " 0.00 0.00"
        lines = [Text.assemble((" # ", "dim"), (fit(LEGENDS, span).ljust(span), "dim"), ("  run last", "dim"))]
        lines += [_bar(b, span) for b in self._bars]
        if len(lines) > rows:
            lines = lines[1:]
        if len(lines) > rows:
            keep = max(0, rows - 1)
            lines = [*lines[:keep], Text(f"+{len(lines) - keep} positions: a taller terminal shows them", "dim")]
        return lines

    def _room(self) -> int:
        """Rows the container leaves this widget: its own height follows its content, so it cannot say."""
        parent = self.parent
        if not isinstance(parent, Widget) or not parent.content_size.height:
            return 10**6
        return max(0, parent.content_size.height - self.styles.gutter.height)

    def _draw(self) -> None:
        self.update(Text("\n").join(self.lines()))


def _bar(b: Position, span: int) -> Text:
    """``NN ██████▌   ┃  0.87 0.86``: the bar is the run's mean, the tick the latest interval's."""
    cells = [" "] * span
    if b.mean is not None:
        filled = max(0.0, min(1.0, b.mean)) * span
        cells[: int(filled)] = ["█"] * int(filled)
        if int(filled) < span:
            cells[int(filled)] = EIGHTHS[int((filled - int(filled)) * 8)]
    text = Text(f"{b.position:>2} ")
    tick = None if b.last is None else min(span - 1, int(max(0.0, min(1.0, b.last)) * span))
    for i, c in enumerate(cells):
        text.append("┃" if i == tick else c, style="bold yellow" if i == tick else "cyan")
    mean = "-" if b.mean is None else f"{b.mean:.2f}"
    last = "-" if b.last is None else f"{b.last:.2f}"
    text.append(f" {mean:>4} {last:>4}")
    return text


HELP = """\
[b]acceptmon tail[/b]                          [reverse] Esc, ? or q closes this help [/reverse]
q quit · p pause/resume the display (reading goes on; the header: PAUSED)
r reset the window · s sort the rank table by its next column (▲/▼ marks
  it; click a column header to sort by it, again to reverse)
f next file, with several: the header says which file the tiles, plots,
  rank table and run are for (at first the newest run with data); the
  history has a file column, its * the shown file's current run

[b]accept len[/b]: tokens accepted per verify step, bonus token included.
[b]accept rate[/b]: the big number is normalized, (accept len-1)/(draft tokens-1);
  "logged" is what this SGLang version prints (its definition changed).
  Without a launch line (no draft tokens to normalize by): as logged.
[b]tok/s[/b]: the tile sums the current run's ranks; the plot, the rank table
  and the history's tok/s/rank are per rank.
[b]Times[/b] are log time. An event has the time of the log line behind it;
  --:--:-- marks notes with none (start-up, waiting for a file, format
  drift, a stall). "read 2s ago" and the rank table's "seen": wall clock.
Red: window mean below --alert-below, or 30% below the run's first 10 min.
No stall alarm once the input has ended (a finished demo replay).
"same config as run N": the launch repeats the previous run's server_args,
  so a change in accept len comes from elsewhere (draft model, workload).
vLLM: acceptance from spec lines, load from throughput lines; the rows are
  engines and the tiles sum them. "accepted by position": per draft
  position, the share of drafts accepted up to it (bar: this run, weighted
  by drafts; ┃ and "last": each engine's latest interval).
Under 120 columns: no rank table, running or KV tile, or throughput plot."""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(HELP)
