"""The dashboard's own widgets: a value tile and the help screen."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.screen import ModalScreen
from textual.widgets import Static


class Tile(Static):
    """A big number with a title and a smaller line under it."""

    def __init__(self, title: str, *, id: str) -> None:
        super().__init__("-", id=id)
        self.border_title = title

    def show(self, value: str, sub: str, health: str = "none") -> None:
        self.update(Text.assemble((value, "bold"), "\n", (sub, "dim")))
        for h in ("good", "warn", "bad", "none"):
            self.set_class(h == health, f"-{h}")


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        yield Static(
            "[b]acceptmon tail[/b]\n\n"
            "  q  quit\n  p  pause / resume the display (reading goes on)\n"
            "  r  reset the window (means and plots start afresh)\n  ?  this help\n\n"
            "  s  sort the rank table by its next column\n\n"
            "Click a column header of the rank table to sort by it (again: reverse).\n\n"
            "accept len: tokens accepted per verify step, bonus token included.\n"
            "accept rate (normalized): (accept len - 1) / (draft tokens - 1).\n"
            "accept rate (as logged): what this SGLang version prints; definitions changed.\n"
            "Red: window mean below --alert-below or 30% below the run's first 10 minutes.",
            id="help",
        )
