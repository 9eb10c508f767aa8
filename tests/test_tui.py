"""The Textual dashboard, driven by Pilot: tiles, tables, header, keys; and an SVG snapshot."""

from __future__ import annotations

import time

from textual.widgets import DataTable

from acceptmon.parse.parser import Parser
from acceptmon.tui.app import AcceptmonApp, Tile
from acceptmon.tui.model import DashboardState
from acceptmon.tui.ranks import RankTable
from tests.serving import decode_line, launch_line
from tests.test_dashboard import Clock, feed, ts

SIZE = (140, 45)


def seeded_state(grammars) -> DashboardState:
    """Two runs: a broken one (accept len 1.12) and the fixed one (about 2.85), two ranks."""
    state = DashboardState(clock=Clock())
    p = Parser(grammars, "server.log")
    feed(state, p, launch_line(ts=ts(0), steps=3, tokens=4))
    feed(state, p, *(decode_line(rank=f"DP{i % 2} TP{i % 2}", acc=1.12, tput=75, ts=ts(1 + i)) for i in range(8)))
    feed(state, p, launch_line(ts=ts(100), steps=5, tokens=6))
    feed(state, p, *(decode_line(rank=f"DP{i % 2} TP{i % 2}", acc=2.8 + (i % 3) * 0.05, tput=94 - i % 2,
                                 running=3 + i % 2, queued=i % 2, ts=ts(101 + i)) for i in range(12)))  # fmt: skip
    return state


async def until(pilot, condition, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    """Let the app run until ``condition()`` holds (the screen refreshes on a timer); generous, for a busy
    machine: a condition that holds returns at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        await pilot.pause(0.05)
    return bool(condition())


async def eventually(pilot, check, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    """Let the app run until ``check()`` passes; its last AssertionError once ``timeout`` is up. For what the
    layout decides (regions, sizes, scrolling, a tile's wording for its width): a relayout takes a refresh or
    a few, and ``pilot.pause()`` takes a busy machine's process, short of CPU, for an idle one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await pilot.pause(0.05)


def tile_text(app: AcceptmonApp, tile_id: str) -> str:
    return str(app.query_one(f"#{tile_id}", Tile).render())


def cells(app: AcceptmonApp, table_id: str) -> list[list[str]]:
    table = app.query_one(f"#{table_id}", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_tiles_tables_and_header_show_the_current_run(grammars):
    app = AcceptmonApp(seeded_state(grammars))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # The last batch (i = 11, DP1) has 2.8 + 2 * 0.05; the run's twelve average 2.85.
        assert tile_text(app, "accept_len").splitlines() == ["2.90", "window mean 2.85"]
        # (2.85 - 1) / (6 - 1), normalized; the logged 0.47 is said as such
        assert tile_text(app, "accept_rate").split("\n", 1) == ["0.37", "normalized; logged 0.47"]
        assert tile_text(app, "throughput").splitlines() == ["187.0", "sum of 2 ranks"]  # 94 + 93
        assert app.query_one("#throughput", Tile).border_title == "gen tok/s"
        assert tile_text(app, "running").splitlines()[0] == "7"
        assert tile_text(app, "queued").splitlines()[0] == "1"
        header = str(app.query_one("#header").render())
        assert "EAGLE3  steps 5  topk 1  draft tokens 6" in header and "run 2 started 2026-02-26 14:01:40" in header
        ranks = cells(app, "ranks")
        assert [r[:3] for r in ranks] == [["DP0 TP0", "2.85", "2.85"], ["DP1 TP1", "2.90", "2.85"]]
        history = cells(app, "history")
        assert [(r[0], r[3], r[7]) for r in history] == [("1", "3", "1.12"), ("2 *", "5", "2.85")]
        assert [str(c.label) for c in app.query_one("#history", DataTable).columns.values()][-2] == "tok/s/rank"
        assert app.query_one("#accept_len", Tile).has_class("-good")


async def test_keys_pause_reset_help_quit(grammars):
    state = seeded_state(grammars)
    app = AcceptmonApp(state)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        assert "PAUSED" in str(app.query_one("#header").render())
        state.add("server.log", Parser(grammars, "server.log").feed((decode_line(acc=1.0, ts=ts(120)) + "\n").encode()))
        await pilot.pause(0.4)
        assert tile_text(app, "accept_len").splitlines()[0] == "2.90"  # frozen while paused
        await pilot.press("p")
        assert await until(pilot, lambda: tile_text(app, "accept_len").splitlines()[0] == "1.00")
        await pilot.press("r")
        assert await until(pilot, lambda: tile_text(app, "accept_len").splitlines()[1] == "window mean -")
        for close in ("escape", "question_mark", "q"):  # the help says how to close it, and each way does
            await pilot.press("question_mark")
            assert app.screen.__class__.__name__ == "HelpScreen"
            assert "Esc, ? or q closes this help" in str(app.screen.query_one("#help Static").render())
            await pilot.press(close)
            assert app.screen.__class__.__name__ != "HelpScreen"
        await pilot.press("q")
    assert app.return_code == 0


async def test_collapse_turns_the_tile_red_and_logs_an_event(grammars):
    state = DashboardState(alert_below=2.0, clock=Clock())
    p = Parser(grammars, "server.log")
    feed(state, p, launch_line(ts=ts(0)), *(decode_line(acc=1.12, ts=ts(1 + i)) for i in range(6)))
    app = AcceptmonApp(state)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.query_one("#accept_len", Tile).has_class("-bad")
        lines = [str(line.text) for line in app.query_one("#events").lines]
        assert any("acceptance collapse: window mean accept len 1.12, below 2" in line for line in lines)


async def test_rank_table_sorts_by_a_clicked_column(grammars):
    app = AcceptmonApp(seeded_state(grammars))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one("#ranks", DataTable)
        table.post_message(DataTable.HeaderSelected(table, table.columns and list(table.columns)[1], 1, "accept len"))
        await pilot.pause()
        assert [r[0] for r in cells(app, "ranks")] == ["DP0 TP0", "DP1 TP1"]  # ascending: 2.85, 2.90
        table.post_message(DataTable.HeaderSelected(table, list(table.columns)[1], 1, "accept len"))
        await pilot.pause()
        assert [r[0] for r in cells(app, "ranks")] == ["DP1 TP1", "DP0 TP0"]  # descending
        await pilot.press("s")  # keyboard: the next column (window mean), ascending; ties keep rank order
        ranks = app.query_one("#ranks", RankTable)
        assert ranks.order == ("window_mean", False)
        assert labels(app) == ["rank", "last", "mean▲", "tok/s", "running", "queue", "seen"]
        table.post_message(DataTable.HeaderSelected(table, list(table.columns)[2], 2, "mean"))
        await pilot.pause()
        assert labels(app)[2] == "mean▼"
        await pilot.press("s", "s", "s", "s", "s")  # throughput, running, queued, last seen, back to rank
        assert ranks.order == ("rank", False) and [r[0] for r in cells(app, "ranks")] == ["DP0 TP0", "DP1 TP1"]
        assert labels(app)[:2] == ["rank▲", "last"]


def labels(app: AcceptmonApp) -> list[str]:
    return [str(c.label) for c in app.query_one("#ranks", DataTable).columns.values()]


def test_main_screen_snapshot(grammars, snap_compare):
    assert snap_compare(AcceptmonApp(seeded_state(grammars), files="server.log"), terminal_size=SIZE)


async def test_80x24_shows_fewer_things_whole(grammars):
    """A small terminal drops the rank table, two tiles and a plot, and shows the rest uncut."""
    app = AcceptmonApp(seeded_state(grammars), files="server.log")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()  # mounted and laid out before the key, also on a busy machine
        await pilot.press("p")
        await pilot.wait_for_scheduled_animations()
        assert await until(pilot, lambda: app.screen.has_class("-short") and app.screen.has_class("-narrow"))

        def laid_out() -> None:
            assert app.screen.max_scroll_y == 0  # everything fits: nothing hides below the fold
            header = str(app.query_one("#header").render()).splitlines()
            assert header[0].startswith(" PAUSED ") and len(header) == 2 and max(map(len, header)) <= 78, header
            shown = {t.id: t for t in app.query(Tile) if t.display}
            assert list(shown) == ["accept_len", "accept_rate", "throughput", "queued"]
            wordings = {i: (t.wording(), t.content_size.width, t.size.width) for i, t in shown.items()}
            assert {i: w for i, (w, _, _) in wordings.items()} == {
                "accept_len": ("accept len", "window mean 2.85"),
                "accept_rate": ("accept rate", "normalized; logged 0.47"),
                "throughput": ("gen tok/s", "sum of 2 ranks"),
                "queued": ("queued req", "7 running"),
            }
            assert all(len(sub) <= width and len(title) <= outer for (title, sub), width, outer in wordings.values())
            plot = app.query_one("#accept_plot")
            assert plot.display and plot.region.height >= 9, plot.region  # title, 7 data rows, the x ticks
            assert not app.query_one("#throughput_plot").display and not app.query_one("#ranks_box").display
            history = app.query_one("#history", DataTable)
            assert [str(c.label) for c in history.columns.values()][-4:] == ["len", "rate", "tok/s/rank", "time"]
            assert history.max_scroll_x == 0  # no column runs off the right edge
            assert app.query_one("#events").region.bottom <= 23  # above the footer's row

        await eventually(pilot, laid_out)


async def test_140x45_shows_everything(grammars):
    async with AcceptmonApp(seeded_state(grammars)).run_test(size=SIZE) as pilot:
        await pilot.pause()
        app = pilot.app

        def laid_out() -> None:
            assert not app.screen.has_class("-short") and not app.screen.has_class("-narrow")
            assert all(t.display for t in app.query(Tile)) and app.query_one("#ranks_box").display
            assert app.query_one("#ranks", DataTable).max_scroll_x == 0
            assert app.query_one("#history", DataTable).max_scroll_x == 0

        await eventually(pilot, laid_out)


def test_header_packs_whole_parts():
    from rich.text import Text

    from acceptmon.tui.widgets import pack

    text: Text = pack([("aaaa", ""), ("bbbbbb", "bold"), ("cc", "")], 12)
    assert text.plain.splitlines() == ["aaaa  bbbbbb", "cc"]
    assert pack([("a" * 20, "")], 12).plain == "a" * 20  # a part wider than the line keeps its own line


def vllm_state(grammars) -> DashboardState:
    """The bundled vLLM data-parallel sample: two runs, two engines, per-position rates."""
    from tests.test_dashboard import vllm_lines

    state = DashboardState(clock=Clock())
    feed(state, Parser(grammars, "vllm.log"), *vllm_lines())
    return state


def bar_lines(app: AcceptmonApp) -> list[str]:
    from acceptmon.tui.widgets import PositionBars

    return [line.plain for line in app.query_one("#positions", PositionBars).lines()]


async def test_vllm_engines_and_per_position_bars_at_140x45(grammars):
    app = AcceptmonApp(vllm_state(grammars), files="vllm.log")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bars = app.query_one("#positions")

        def bars_laid_out() -> None:
            assert bars.display and bars.region.width == 30 and app.screen.max_scroll_y == 0, bars.region
            lines = bar_lines(app)
            width = bars.content_size.width
            assert all(len(line) <= width for line in lines) and lines[0].split() == ["#", "█", "run", "┃", "last",
                                                                                       "run", "last"]  # fmt: skip
            assert [line.split()[0] for line in lines[1:]] == ["1", "2", "3", "4"]  # run 2 drafts 4 tokens
            assert lines[1].endswith(" 0.87 0.86") and lines[4].endswith(" 0.37 0.36")
            # 0.874 and 0.372 of 13 cells: 11 and 4 whole cells, then the tick at the latest 0.865 and 0.362
            assert lines[1].count("█") == 11 and lines[4].count("█") == 4 and lines[1][14] == "┃", lines

        await eventually(pilot, bars_laid_out)
        # the window (5 min) holds all of run 2: the engines' mean rates summed, runs' tok/s_total 515.0
        assert tile_text(app, "throughput").splitlines() == ["515.0", "sum of 2 engines"]
        assert tile_text(app, "token_usage").splitlines()[1] == "KV, fullest engine"
        assert labels(app)[0] == "engine▲" and [r[:3] for r in cells(app, "ranks")] == [["000", "3.39", "3.47"],
                                                                                        ["001", "3.51", "3.49"]]  # fmt: skip
        assert app.query_one("#ranks", DataTable).border_title.startswith("engines: ")
        assert "last spec 00:02:09" in str(app.query_one("#header").render())
        # the history's tok/s per engine, like the engine rows (runs' 441.8 and 515.0 add up 2 engines)
        assert [r[-2] for r in cells(app, "history")] == ["220.9", "257.5"]


async def test_vllm_at_80x24_keeps_the_bars_whole_beside_the_accept_plot(grammars):
    app = AcceptmonApp(vllm_state(grammars), files="vllm.log")
    async with app.run_test(size=(80, 24)) as pilot:
        bars, plot = app.query_one("#positions"), app.query_one("#accept_plot")
        await pilot.wait_for_scheduled_animations()
        # laid out in the short, narrow layout with the bars shown (a busy machine takes a few refreshes)
        assert await until(pilot, lambda: app.screen.has_class("-short") and bars.display and bars.region.width == 28)

        def laid_out() -> None:
            assert bars.display and plot.display and not app.query_one("#throughput_plot").display
            assert app.screen.max_scroll_y == 0 and bars.region.right <= 80 and plot.region.width >= 45, plot.region
            lines = bar_lines(app)
            assert len(lines) == 5 and all(len(line) <= bars.content_size.width for line in lines), lines
            assert lines[1].endswith(" 0.87 0.86")

        await eventually(pilot, laid_out)


async def test_sglang_shows_no_position_bars(grammars):
    async with AcceptmonApp(seeded_state(grammars)).run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not pilot.app.query_one("#positions").display
        assert labels(pilot.app)[0] == "rank▲"
        assert pilot.app.query_one("#ranks", DataTable).border_title.startswith("ranks: ")


async def test_the_bars_keep_their_legend_when_a_run_drafts_more_tokens(grammars):
    """The widget's height follows its content: room is the container's, or 3 bars then 4 would drop the legend."""
    from acceptmon.tui.view import Position
    from acceptmon.tui.widgets import PositionBars

    app = AcceptmonApp(vllm_state(grammars), files="vllm.log")
    async with app.run_test(size=SIZE) as pilot:
        bars = app.query_one("#positions", PositionBars)
        app.refresh_view = lambda: None  # type: ignore[method-assign]  # only this test's bars
        for n in (3, 4, 2, 4):
            bars.show([Position(position=i, mean=0.5, last=0.4) for i in range(1, n + 1)])
            # legend, bars and the two border rows, once laid out (a busy machine takes a few refreshes)
            assert await until(pilot, lambda n=n: bars.region.height == n + 3), (n, bars.region)
            lines = bar_lines(app)
            assert len(lines) == n + 1 and lines[0].split()[:3] == ["#", "█", "run"], (n, lines)


async def test_a_refresh_after_the_app_stopped_draws_nothing(grammars):
    """The refresh timer can tick once more while the app shuts down, its widgets already gone."""
    app = AcceptmonApp(vllm_state(grammars), files="vllm.log")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
    assert not app.is_running
    app.refresh_view(force=True)  # no NoMatches for '#header'
    assert app.state.view().version >= 0


def header_row(app: AcceptmonApp, table_id: str = "ranks") -> str:
    """The table's column header as drawn (a label longer than its column is cut to it there)."""
    return app.query_one(f"#{table_id}", DataTable).render_line(0).text


async def test_the_sort_marker_stays_on_the_sorted_column_as_drawn(grammars):
    app = AcceptmonApp(seeded_state(grammars))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert header_row(app).split() == ["rank▲", "last", "mean", "tok/s", "running", "queue", "seen"]
        for i, name in enumerate(["last", "mean", "tok/s", "running", "queue", "seen", "rank"]):
            await pilot.press("s")
            assert await until(pilot, lambda name=name: f"{name}▲" in header_row(app)), (name, header_row(app))
            drawn = header_row(app)
            assert drawn.count("▲") == 1 and "▼" not in drawn, drawn
            assert app.query_one("#ranks", DataTable).row_count == 2, i
        table = app.query_one("#ranks", DataTable)
        table.post_message(DataTable.HeaderSelected(table, next(iter(table.columns)), 0, "rank"))  # again: descending
        assert await until(pilot, lambda: "rank▼" in header_row(app)), header_row(app)
        assert [r[0] for r in cells(app, "ranks")] == ["DP1 TP1", "DP0 TP0"]
        assert app.query_one("#ranks", DataTable).max_scroll_x == 0  # the marker's cell fits beside the rest


def many_ranks(grammars) -> DashboardState:
    state = DashboardState(clock=Clock())
    feed(state, Parser(grammars, "s.log"), launch_line(ts=ts(0)),
         *(decode_line(rank=f"DP{r} TP{r}", acc=2.0 + r / 100, ts=ts(1)) for r in (10, 2, 0, 11, 1, 9)))  # fmt: skip
    return state


async def test_ranks_sort_numbers_as_numbers(grammars):
    app = AcceptmonApp(many_ranks(grammars))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        names = ["DP0 TP0", "DP1 TP1", "DP2 TP2", "DP9 TP9", "DP10 TP10", "DP11 TP11"]
        assert [r[0] for r in cells(app, "ranks")] == names
        table = app.query_one("#ranks", DataTable)
        table.post_message(DataTable.HeaderSelected(table, next(iter(table.columns)), 0, "rank"))
        assert await until(pilot, lambda: [r[0] for r in cells(app, "ranks")] == names[::-1]), cells(app, "ranks")


async def test_without_a_launch_line_the_accept_rate_tile_shows_the_logged_rate(grammars):
    state = DashboardState(clock=Clock())  # stats lines only: no draft tokens to normalize by
    feed(state, Parser(grammars, "s.log"), *(decode_line(acc=2.85, ts=ts(1 + i)) for i in range(3)))
    app = AcceptmonApp(state)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert tile_text(app, "accept_rate").split("\n", 1) == ["0.47", "as logged; no launch line"]
        assert tile_text(app, "accept_len").splitlines() == ["2.85", "window mean 2.85"]
    async with AcceptmonApp(state).run_test(size=(80, 24)) as pilot:  # a narrow tile: the shorter wording
        app = pilot.app
        assert await until(pilot, lambda: tile_text(app, "accept_rate").splitlines()[0] == "0.47")
        tile = app.query_one("#accept_rate", Tile)

        def narrow_wording() -> None:
            wording = tile.wording()[1]
            assert wording.startswith("as logged") and len(wording) <= tile.content_size.width, (wording, tile.size)

        await eventually(pilot, narrow_wording)


def first_column(app: AcceptmonApp, table_id: str) -> str:
    return str(next(iter(app.query_one(f"#{table_id}", DataTable).columns.values())).label)


def footer_keys(app: AcceptmonApp) -> list[str]:
    """The keys the footer offers now (an action whose check says no is left out)."""
    return [b.key for _, b, enabled, _ in app.screen.active_bindings.values() if enabled and b.show]


async def test_several_files_say_which_file_each_thing_is_and_f_switches(grammars):
    from tests.test_dashboard import three_servers

    app = AcceptmonApp(three_servers(grammars))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        header = str(app.query_one("#header").render())
        assert "spec.log, baseline.log, broken.log  showing baseline.log (f: next file)" in header
        assert "f" in footer_keys(app)
        # broken.log launched last: the tiles are still the newest run with data, the baseline's
        assert tile_text(app, "throughput").splitlines() == ["143.0", "sum of 2 ranks"]
        assert tile_text(app, "running").splitlines()[0] == "8"
        assert [r[0] for r in cells(app, "ranks")] == ["TP0", "TP1"]  # the shown file's ranks
        assert first_column(app, "history") == "file"
        assert [r[:2] for r in cells(app, "history")] == [["spec.log", "1"], ["baseline.log", "1 *"],
                                                          ["broken.log", "1"]]  # fmt: skip
        await pilot.press("f")
        assert await until(pilot, lambda: "showing broken.log" in str(app.query_one("#header").render()))
        assert tile_text(app, "throughput").splitlines()[0] == "-" and cells(app, "ranks") == []
        assert [r[1] for r in cells(app, "history")] == ["1", "1", "1 *"]
        await pilot.press("f")
        assert await until(pilot, lambda: "showing spec.log" in str(app.query_one("#header").render()))
        assert tile_text(app, "accept_len").splitlines() == ["3.21", "window mean 3.21"]
        assert tile_text(app, "throughput").splitlines() == ["1034.0", "sum of 11 ranks"]
        assert "EAGLE3  steps 5  topk 1  draft tokens 6" in str(app.query_one("#header").render())
        assert [r[0] for r in cells(app, "ranks")][:3] == ["DP0 TP0", "DP1 TP1", "DP2 TP2"]
        # less room beside the history's file column: whole columns, the rightmost left out, none cut
        table = app.query_one("#ranks", DataTable)
        assert await until(pilot, lambda: table.max_scroll_x == 0), (labels(app), table.size)
        assert labels(app) == ["rank▲", "last", "mean", "tok/s", "running", "queue", "seen"][: len(labels(app))]
        assert len(labels(app)) >= 4 and header_row(app).split() == labels(app)
        await pilot.press("s", "s", "s", "s", "s", "s")  # sorted by seen: that column stays, others go
        assert await until(pilot, lambda: labels(app)[-1] == "seen▲" and table.max_scroll_x == 0), labels(app)
        assert labels(app)[:4] == ["rank", "last", "mean", "tok/s"]
        await pilot.press("f")  # round again, to the first shown
        assert await until(pilot, lambda: "showing baseline.log" in str(app.query_one("#header").render()))


async def test_one_file_offers_no_file_switch(grammars):
    app = AcceptmonApp(seeded_state(grammars))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "f" not in footer_keys(app) and "s" in footer_keys(app)
        await pilot.press("f")
        await pilot.pause()
        assert "showing" not in str(app.query_one("#header").render())
        assert first_column(app, "history") == "run"
