"""The dashboard's rank table: one row per rank or engine of the shown file, sorted by a column that says so.

The sorted column's label carries ▲ (ascending) or ▼ (descending). A Textual column is as wide as
its label was when it was added (a longer label later is cut back to that width), so a change of
label makes the columns again. Ranks sort as a person reads them, numbers as numbers (DP2 before
DP10). Like the tiles, the table shows whole columns or none: when the columns do not fit its width
(several files leave it less room), the rightmost go first, never the rank nor the sorted one.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from textual.widgets import DataTable

from acceptmon.display import number as fmt
from acceptmon.tui.tiles import natural
from acceptmon.tui.view import RankRow, ago
from acceptmon.tui.widgets import fit

RANK_COLUMNS = (
    ("rank", "rank"),
    ("accept_len", "last"),
    ("window_mean", "mean"),
    ("throughput", "tok/s"),
    ("running", "running"),
    ("queued", "queue"),
    ("seen_ago", "seen"),
)
"""(key, label) of each column, left to right; the first's label is the unit (``rank``, ``engine``)."""
SORT_COLUMNS = tuple(key for key, _ in RANK_COLUMNS)
PADDING = 2
"""Cells a column takes beside its widest content (DataTable's cell padding, one each side)."""


class RankTable(DataTable[str]):
    """The rows of one file, sorted by ``order`` (a column key, descending or not)."""

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.order: tuple[str, bool] = ("rank", False)
        self.unit = "rank"
        """What the rows are: ``rank`` or ``engine``."""
        self._rows: Sequence[RankRow] = ()

    def next_column(self) -> str:
        """Sort by the next column, ascending; after the last, by rank again."""
        column, _ = self.order
        following = SORT_COLUMNS[(SORT_COLUMNS.index(column) + 1) % len(SORT_COLUMNS)]
        self.order = (following, False)
        self._draw()
        return following

    def sort_by(self, column: str) -> None:
        """A header click: sort by that column, ascending; the sorted column again reverses."""
        current, reverse = self.order
        self.order = (column, not reverse if column == current else False)
        self._draw()

    def show(self, rows: Sequence[RankRow], unit: str) -> None:
        self._rows, self.unit = rows, unit
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def labels(self) -> list[str]:
        """Every column's label, the sorted one marked."""
        column, reverse = self.order
        names = dict(RANK_COLUMNS) | {"rank": self.unit}
        return [names[k] + (("▼" if reverse else "▲") if k == column else "") for k in SORT_COLUMNS]

    def _draw(self) -> None:
        if not self.is_mounted:
            return
        titles = (f"{self.unit}s: accept len last, window mean (s sorts)", f"{self.unit}s (s sorts)")
        self.border_title = fit(titles, self.size.width - 6 if self.size.width else 10**6)  # "╭─ title ─╮"
        rows = [_cells(r) for r in self._ordered()]
        labels = self.labels()
        widths = [max([cell_len(label), *(cell_len(r[i]) for r in rows)]) + PADDING for i, label in enumerate(labels)]
        shown = self._fitting(widths)
        columns = [(SORT_COLUMNS[i], labels[i]) for i in shown]
        if [(str(k.value), str(c.label)) for k, c in self.columns.items()] != columns:
            self.clear(columns=True)
            for key, label in columns:
                self.add_column(label, key=key)
        self.clear()
        for r in rows:
            self.add_row(*(r[i] for i in shown))

    def _ordered(self) -> list[RankRow]:
        column, reverse = self.order

        def key(r: RankRow) -> tuple[bool, object]:
            if column == "rank":  # as a person reads them: DP2 before DP10
                return (False, natural(r.rank))
            value = getattr(r, column)
            return (value is None, value if value is not None else 0)

        return sorted(self._rows, key=key, reverse=reverse)

    def _fitting(self, widths: list[int]) -> list[int]:
        """The columns (indexes) that fit the table's width: the rightmost go first, but the rank and the sorted."""
        room = self.scrollable_content_region.width
        shown = list(range(len(widths)))
        if not room:
            return shown  # not laid out yet
        keep = {0, SORT_COLUMNS.index(self.order[0])}
        for i in reversed(range(len(widths))):
            if sum(widths[j] for j in shown) <= room:
                break
            if i not in keep:
                shown.remove(i)
        return shown


def _cells(r: RankRow) -> tuple[str, ...]:
    return (
        r.rank or "-",
        fmt(r.accept_len),
        fmt(r.window_mean),
        fmt(r.throughput, 1),
        fmt(r.running),
        fmt(r.queued),
        ago(r.seen_ago, ""),
    )
