"""The Textual dashboard of ``acceptmon tail``: lays out a :class:`~acceptmon.dashboard.View`.

Every number on screen comes from :class:`~acceptmon.dashboard.DashboardState`,
which the live source feeds from a worker thread. The app redraws on a timer
(four times a second, and only what changed), so a log growing by thousands of
lines a second costs one redraw per tick, and keys stay responsive.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, RichLog, Static
from textual_plotext import PlotextPlot

from acceptmon.fmt import duration, short_model
from acceptmon.fmt import number as fmt
from acceptmon.tui.model import DashboardState
from acceptmon.tui.view import Event, RankRow, View
from acceptmon.tui.widgets import HelpScreen, Tile

REFRESH_SECONDS = 0.25
COMPACT_BELOW_ROWS = 34
"""Terminals with fewer rows get the compact layout (smaller tiles, plots and event log)."""
Follow = Callable[[threading.Event], None]


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s ago"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


class AcceptmonApp(App[None]):
    """The dashboard."""

    CSS_PATH = "app.tcss"
    TITLE = "acceptmon"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("p", "pause", "Pause/resume"),
        Binding("r", "reset", "Reset window"),
        Binding("s", "sort", "Sort ranks"),
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
        self._sort: tuple[str, bool] = ("rank", False)
        self._history_key: object = None
        self._sigterm = False

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
            yield PlotextPlot(id="accept_plot")
            yield PlotextPlot(id="throughput_plot")
        with Horizontal(id="tables"):
            with Vertical(id="ranks_box"):
                yield DataTable(id="ranks", cursor_type="row", zebra_stripes=True)
            with Vertical(id="history_box"):
                yield DataTable(id="history", cursor_type="row", zebra_stripes=True)
        yield RichLog(id="events", max_lines=500, markup=False, wrap=False)
        yield Footer()

    def on_mount(self) -> None:
        ranks = self.query_one("#ranks", DataTable)
        for key, label in (("rank", "rank"), ("accept_len", "last"), ("window_mean", "mean"),
                           ("throughput", "tok/s"), ("running", "running"), ("queued", "queued"),
                           ("seen_ago", "seen")):  # fmt: skip
            ranks.add_column(label, key=key)
        ranks.border_title = "ranks: accept len last, window mean (s sorts)"
        history = self.query_one("#history", DataTable)
        for label in ("run", "start", "spec", "steps", "topk", "draft", "batch", "len", "rate", "tok/s", "time"):
            history.add_column(label, key=label)
        history.border_title = "run history (means: len = accept len, rate = normalized accept rate)"
        self.query_one("#events", RichLog).border_title = "events"
        self.set_interval(REFRESH_SECONDS, self.refresh_view)
        self.on_resize()
        self.refresh_view()
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
        self.screen.set_class(self.size.height < COMPACT_BELOW_ROWS, "-compact")

    # -- actions --------------------------------------------------------------------------

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_view(force=True)

    def action_reset(self) -> None:
        self.state.reset_window()
        self.notify("window reset")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    SORT_COLUMNS = ("rank", "accept_len", "window_mean", "throughput", "running", "queued", "seen_ago")

    def action_sort(self) -> None:
        """Next column of the rank table, ascending; after the last, back to rank."""
        column, _ = self._sort
        following = self.SORT_COLUMNS[(self.SORT_COLUMNS.index(column) + 1) % len(self.SORT_COLUMNS)]
        self._sort = (following, False)
        self._fill_ranks(self.state.view().ranks)
        self.notify(f"ranks sorted by {following.replace('_', ' ')}", timeout=2)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        if event.data_table.id != "ranks":
            return
        key = str(event.column_key.value)
        column, reverse = self._sort
        self._sort = (key, not reverse if key == column else False)
        self._fill_ranks(self.state.view().ranks)

    # -- drawing --------------------------------------------------------------------------

    def refresh_view(self, force: bool = False) -> None:
        self.state.check()
        view = self.state.view()
        self._header(view)
        if self.paused and not force:
            return
        if view.version == self._version and not force:
            self._fill_ranks(view.ranks)  # "last seen" moves on with time
            return
        self._version = view.version
        self._tiles(view)
        self._plots(view)
        self._fill_ranks(view.ranks)
        self._history(view)
        self._events(view)

    def _header(self, v: View) -> None:
        parts: list[str | tuple[str, str]] = [
            ("acceptmon", "bold"),
            "  ",
            (self.files_label or ", ".join(Path(f).name for f in v.files), "bold"),
        ]
        cfg = v.launch
        if cfg is not None:
            model = short_model(cfg.model_path or "?")
            if cfg.spec_algorithm:
                spec = (
                    f"{cfg.spec_algorithm}  steps {fmt(cfg.spec_num_steps)}  topk {fmt(cfg.spec_eagle_topk)}  "
                    f"draft tokens {fmt(cfg.spec_num_draft_tokens)}"
                )
            else:
                spec = "no speculation"
            parts += ["  |  ", model, "  |  ", (spec, "bold")]
        if v.run:
            start = v.run_start.strftime("%Y-%m-%d %H:%M:%S") if v.run_start else "?"
            parts += [f"  |  run {v.run} started {start}"]
        line2: list[str | tuple[str, str]] = []
        if v.last_decode_time is not None:
            line2 += [f"last decode {v.last_decode_time:%H:%M:%S} (read {ago(v.last_decode_ago)})"]
        else:
            line2 += ["no decode line yet"]
        line2 += [f"  |  {v.lines:,} lines"]
        if v.waiting:
            line2 += ["  |  ", (f"waiting for {', '.join(v.waiting)} to appear", "bold yellow")]
        if v.backfill is not None:
            line2 += ["  |  ", (f"back-filling the current run {100 * v.backfill:.0f}%", "bold cyan")]
        if self.paused:
            line2 += ["  |  ", ("PAUSED (p to resume)", "bold reverse")]
        self.query_one("#header", Static).update(Text.assemble(*parts, "\n", *line2))

    def _tiles(self, v: View) -> None:
        t = v.tiles
        self.query_one("#accept_len", Tile).show(fmt(t.accept_len_last), f"window mean {fmt(t.accept_len_mean)}",
                                                 t.health)  # fmt: skip
        self.query_one("#accept_rate", Tile).show(
            fmt(t.draft_accept_rate), f"norm. · logged {fmt(t.accept_rate)}", t.health
        )
        self.query_one("#throughput", Tile).show(fmt(t.throughput, 1), "tok/s, all ranks")
        self.query_one("#running", Tile).show(fmt(t.running), "requests")
        self.query_one("#queued", Tile).show(fmt(t.queued), "requests", "warn" if t.queued else "none")
        usage = None if t.token_usage is None else 100 * t.token_usage
        self.query_one("#token_usage", Tile).show(fmt(usage, 0, "%"), "KV, fullest rank")

    def _plots(self, v: View) -> None:
        window = self.state.window
        for plot_id, series, ref, ref_label, title, ylabel in (
            ("#accept_plot", v.accept_series, v.accept_reference, v.accept_reference_label,
             "accept len (mean over ranks)", "tokens/step"),
            ("#throughput_plot", v.throughput_series, v.throughput_reference, v.throughput_reference_label,
             "gen throughput per rank", "tok/s"),
        ):  # fmt: skip
            widget = self.query_one(plot_id, PlotextPlot)
            plt = widget.plt
            plt.clear_data()
            plt.clear_figure()
            plt.title(title + (f"  (--- {ref_label} {ref:.2f})" if ref is not None else ""))
            plt.xlabel(f"seconds into the {window:.0f}s window (log time)")
            plt.ylabel(ylabel)
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
            widget.refresh()

    def _fill_ranks(self, rows: tuple[RankRow, ...]) -> None:
        table = self.query_one("#ranks", DataTable)
        column, reverse = self._sort

        def key(r: RankRow) -> tuple[bool, object]:
            value = getattr(r, column)
            return (value is None, value if value is not None else 0)

        ordered = sorted(rows, key=key, reverse=reverse)
        table.clear()
        multi = len({r.file for r in rows}) > 1
        for r in ordered:
            name = f"{Path(r.file).name}: {r.rank or '-'}" if multi else (r.rank or "-")
            table.add_row(name, fmt(r.accept_len), fmt(r.window_mean), fmt(r.throughput, 1), fmt(r.running),
                          fmt(r.queued), ago(r.seen_ago))  # fmt: skip

    def _history(self, v: View) -> None:
        key = (v.history, v.current_run_key)
        if key == self._history_key:
            return
        self._history_key = key
        table = self.query_one("#history", DataTable)
        table.clear()
        for h in v.history:
            current = (h.file, h.run) == v.current_run_key
            style = "bold" if current else ""
            start = h.start.strftime("%H:%M:%S") if isinstance(h.start, datetime) else "-"
            cells = (
                f"{h.run}{' *' if current else ''}", start, h.spec_algorithm or "none", fmt(h.spec_num_steps),
                fmt(h.spec_eagle_topk), fmt(h.spec_num_draft_tokens), str(h.batches), fmt(h.accept_len_mean),
                fmt(h.draft_accept_rate_mean), fmt(h.gen_throughput_mean, 1), duration(h.duration_s),
            )  # fmt: skip
            table.add_row(*(Text(c, style=style) for c in cells))

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
            stamp = datetime.fromtimestamp(e.seen).strftime("%H:%M:%S")
            where = f"{Path(e.file).name}: " if e.file and len(v.files) > 1 else ""
            log.write(Text.assemble((stamp + "  ", "dim"), (where + e.text.removeprefix(e.file + ": "), colour)))
        if events:
            self._last_event = events[-1]
