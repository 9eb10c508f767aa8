"""The Textual dashboard of ``acceptmon tail``: lays out a :class:`~acceptmon.tui.view.View`.

Every number on screen comes from :class:`~acceptmon.tui.model.DashboardState`,
which the live source feeds from a worker thread. The app redraws on a timer
(four times a second, and only what changed), so a log growing by thousands of
lines a second costs one redraw per tick, and keys stay responsive. Small terminals
get fewer things, each whole: under 34 rows the short layout (title-only borders), under
120 columns no rank table, running or KV tile, or throughput plot. A vLLM log's rows are its
engines, and the per-position acceptance bars stand beside the plots (hidden when the
current file's server logs no per-position rates). With several files, the tiles, plots, rank table
and header describe one, named in the header (the newest run with data, or the one ``f`` chose); the
run history lists every file's runs, with a file column.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, RichLog, Static

from acceptmon.display import number as fmt
from acceptmon.tui.history import history_cells, history_columns
from acceptmon.tui.model import DashboardState
from acceptmon.tui.ranks import RankTable
from acceptmon.tui.view import Event, View, event_line, header_parts
from acceptmon.tui.widgets import HelpScreen, PositionBars, Tile, WindowPlot, pack

REFRESH_SECONDS = 0.25
COMPARE_SECONDS = 10.0
"""How often the current run is judged against the previous one (``acceptmon compare``'s rule)."""
SHORT_BELOW_ROWS = 34
"""Terminals with fewer rows get the short layout: title-only borders, one-line tiles' sub-lines, fewer rows."""
NARROW_BELOW_COLUMNS = 120
"""Narrower terminals show fewer things whole: no rank table, running or KV tile, or throughput plot."""
Follow = Callable[[threading.Event], None]


class AcceptmonApp(App[None]):
    """The dashboard."""

    CSS_PATH = "app.tcss"
    TITLE = "acceptmon"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("p", "pause", "Pause/resume"),
        Binding("r", "reset", "Reset window"),
        Binding("s", "sort", "Sort ranks"),
        Binding("f", "next_file", "Next file"),
        Binding("question_mark", "help", "Help", key_display="?"),
    ]

    def __init__(self, state: DashboardState, *, follow: Follow | None = None, files: str = "") -> None:
        super().__init__()
        self.state = state
        self.follow = follow
        self.files_label = files
        self.stop = threading.Event()
        self.paused = False
        self._version = -1
        self._last_event: Event | None = None
        self._history_key: object = None
        self._sigterm = False
        self._unit = "rank"
        """What the shown file's rows are: ``rank`` or ``engine``."""
        self._mounted = False
        self._files: tuple[str, ...] = ()
        """The files followed, as last drawn (``f`` is offered with two or more)."""

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Horizontal(id="tiles"):
            yield Tile("accept len", id="accept_len")
            yield Tile("accept rate", id="accept_rate")
            yield Tile("gen throughput", id="throughput")
            yield Tile("running req", id="running")
            yield Tile("queued req", id="queued")
            yield Tile("token usage", id="token_usage")
        with Horizontal(id="plots"):
            yield WindowPlot(id="accept_plot")
            yield WindowPlot(id="throughput_plot")
            yield PositionBars(id="positions")
        with Horizontal(id="tables"):
            with Vertical(id="ranks_box"):
                yield RankTable(id="ranks")
            with Vertical(id="history_box"):
                yield DataTable(id="history", cursor_type="row", zebra_stripes=True)
        yield RichLog(id="events", max_lines=500, markup=False, wrap=True)
        yield Footer()

    def on_mount(self) -> None:
        self._mounted = True
        self.query_one("#history", DataTable).border_title = "run history (means: len = accept len, rate = normalized)"
        self.query_one("#events", RichLog).border_title = "events (log time)"
        self.set_interval(REFRESH_SECONDS, self.refresh_view)
        self.set_interval(COMPARE_SECONDS, self._compare_runs)
        self.on_resize()
        if self.follow is not None:
            follow = self.follow
            self.run_worker(lambda: follow(self.stop), thread=True, name="follow", exit_on_error=False)
        if threading.current_thread() is threading.main_thread():  # signals reach only the main thread
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.exit)
            self._sigterm = True

    def on_unmount(self) -> None:
        self.stop.set()
        if self._sigterm:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)

    def on_resize(self) -> None:
        if not self._mounted:
            return  # on_mount lays out
        main = self.screen_stack[0]  # not the help screen, if it is open
        main.set_class(self.size.height < SHORT_BELOW_ROWS, "-short")
        narrow = self.size.width < NARROW_BELOW_COLUMNS
        main.set_class(narrow, "-narrow")
        self._history_columns(len(self._files) > 1)
        self.refresh_view(force=not self.paused)

    @property
    def narrow(self) -> bool:
        return self.size.width < NARROW_BELOW_COLUMNS

    # -- actions --------------------------------------------------------------------------

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_view(force=True)

    def action_reset(self) -> None:
        self.state.reset_window()
        self.notify("window reset")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``f`` is offered (in the footer too) only while there is another file to switch to."""
        return len(self._files) > 1 if action == "next_file" else True

    def action_next_file(self) -> None:
        """Show the next file (in the order named) in the tiles, plots and header; the choice stays."""
        view = self.state.view()
        if len(view.files) < 2:
            return
        at = view.files.index(view.shown) if view.shown in view.files else -1
        following = view.files[(at + 1) % len(view.files)]
        self.state.select(following)
        self.refresh_view(force=True)  # the header says which file is shown

    def action_sort(self) -> None:
        """Next column of the rank table, ascending; after the last, back to rank."""
        following = self.query_one("#ranks", RankTable).next_column()
        self.notify(f"ranks sorted by {following.replace('_', ' ')}", timeout=2)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        if event.data_table.id != "ranks":
            return
        self.query_one("#ranks", RankTable).sort_by(str(event.column_key.value))

    def _compare_runs(self) -> None:
        """The current run against the previous one, in a thread: the bootstrap takes a moment."""
        self.run_worker(self.state.compare_runs, thread=True, name="compare", exclusive=True, group="compare")

    # -- drawing --------------------------------------------------------------------------

    def refresh_view(self, force: bool = False) -> None:
        if not self.is_running:  # shutting down: a last timer tick finds the widgets gone
            return
        self.state.check()
        view = self.state.view()
        self._header(view)
        if self.paused and not force:
            return
        if view.version == self._version and not force:
            self._fill_ranks(view)  # "last seen" moves on with time
            return
        self._version = view.version
        if view.files != self._files:
            self._files = view.files
            self.refresh_bindings()  # f comes with a second file
        self._unit = view.unit
        self._tiles(view)
        self._plots(view)
        self._fill_ranks(view)
        self._history(view)
        self._events(view)

    def _header(self, v: View) -> None:
        header = self.query_one("#header", Static)
        parts = header_parts(v, self.files_label, paused=self.paused, narrow=self.narrow)
        header.update(pack(parts, max(20, self.size.width - 2)))

    def _tiles(self, v: View) -> None:
        t = v.tiles
        self.query_one("#accept_len", Tile).show(
            fmt(t.accept_len_last), [("accept len", f"window mean {fmt(t.accept_len_mean)}")], t.health
        )
        logged = fmt(t.accept_rate)
        rate = self.query_one("#accept_rate", Tile)
        if t.draft_accept_rate is None and t.accept_rate is not None:  # nothing to normalize by: as logged
            why = "no launch line" if v.launch is None else "draft tokens unknown"
            rate.show(logged, [("accept rate", f"as logged; {why}"), ("accept rate", f"as logged;\n{why}"),
                               ("accept rate", "as logged")], t.health)  # fmt: skip
        else:
            rate.show(
                fmt(t.draft_accept_rate),
                [
                    ("accept rate", f"normalized; logged {logged}"),
                    ("accept rate", f"normalized;\nlogged {logged}"),
                    ("accept rate", f"norm.; logged {logged}"),
                ],
                t.health,
            )
        ranks = f"{t.throughput_ranks or ''} {t.unit}{'' if t.throughput_ranks == 1 else 's'}".lstrip()
        self.query_one("#throughput", Tile).show(
            fmt(t.throughput, 1),
            [
                ("gen throughput", f"tok/s, sum of {ranks}"),
                ("gen throughput", f"tok/s,\nsum of {ranks}"),
                ("gen tok/s", f"sum of {ranks}"),
            ],
        )
        self.query_one("#running", Tile).show(fmt(t.running), [("running req", "requests")])
        queued = f"{fmt(t.running)} running" if self.narrow else "requests"
        self.query_one("#queued", Tile).show(fmt(t.queued), [("queued req", queued)], "warn" if t.queued else "none")
        usage = None if t.token_usage is None else 100 * t.token_usage
        self.query_one("#token_usage", Tile).show(fmt(usage, 0, "%"), [("token usage", f"KV, fullest {t.unit}")])

    def _plots(self, v: View) -> None:
        short = self.size.height < SHORT_BELOW_ROWS
        xlabel = "" if short else f"seconds into the {self.state.window:.0f} s window (log time)"
        bars = self.query_one("#positions", PositionBars)
        bars.display = bool(v.positions)
        bars.show(v.positions)
        for plot_id, series, ref, ref_label, title, brief in (
            (
                "#accept_plot",
                v.accept_series,
                v.accept_reference,
                v.accept_reference_label,
                f"accept len, mean of {v.unit}s",
                "accept len",
            ),
            (
                "#throughput_plot",
                v.throughput_series,
                v.throughput_reference,
                v.throughput_reference_label,
                f"gen tok/s per {v.unit}, mean of {v.unit}s",
                f"gen tok/s per {v.unit}",
            ),
        ):
            refs = (f"  (--- {ref_label} {ref:.2f})", f"  (--- {ref:.2f})") if ref is not None else ("", "")
            x = (f"  x: s in the {self.state.window:.0f} s window", "  x: seconds") if short else ()
            titles = [*(title + refs[0] + t for t in x), title + refs[0], brief + refs[0], brief + refs[1], brief]
            self.query_one(plot_id, WindowPlot).draw(series, titles, ref, xlabel)

    def _fill_ranks(self, v: View) -> None:
        """The shown file's rows (each file's are its own ranks or engines: ``f`` shows the next file)."""
        self.query_one("#ranks", RankTable).show([r for r in v.ranks if r.file == v.shown], v.unit)

    def _history_columns(self, many_files: bool) -> None:
        """The history's columns for this width, with the file's name first when there are several."""
        columns = history_columns(narrow=self.narrow, many_files=many_files)
        history = self.query_one("#history", DataTable)
        if tuple(str(k.value) for k in history.columns) != columns:
            history.clear(columns=True)
            for label in columns:
                history.add_column(label, key=label)
            self._history_key = None

    def _history(self, v: View) -> None:
        self._history_columns(len(v.files) > 1)
        key = (v.history, v.current_run_key, self._unit)
        if key == self._history_key:
            return
        self._history_key = key
        table = self.query_one("#history", DataTable)
        table.clear()
        columns = [str(k.value) for k in table.columns]
        for h in v.history:
            current = (h.file, h.run) == v.current_run_key
            cells = history_cells(h, current, self._unit)
            table.add_row(*(Text(cells[c], style="bold" if current else "") for c in columns))
        if v.history:
            table.scroll_end(animate=False)  # the current run is the last row

    def _events(self, v: View) -> None:
        log = self.query_one("#events", RichLog)
        events = v.events
        start = 0
        if self._last_event is not None:
            for i in range(len(events) - 1, -1, -1):
                if events[i] is self._last_event:
                    start = i + 1
                    break
        for e in events[start:]:
            colour = {"info": "", "warn": "yellow", "bad": "bold red"}[e.level]
            stamp, text = event_line(e, len(v.files) > 1)
            log.write(Text.assemble((stamp + "  ", "dim"), (text, colour)))
        if events:
            self._last_event = events[-1]
