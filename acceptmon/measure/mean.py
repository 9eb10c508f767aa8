"""The one running count-and-sum (with removal, for sliding windows). Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Mean:
    """Running count and sum of one value; values can be taken out again (sliding windows)."""

    count: int = 0
    total: float = 0.0

    def add(self, value: float | None) -> None:
        if value is not None:
            self.count += 1
            self.total += value

    def remove(self, other: Mean) -> None:
        self.count -= other.count
        self.total -= other.total

    def merge(self, other: Mean) -> None:
        self.count += other.count
        self.total += other.total

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count > 0 else None

    @property
    def rounded(self) -> float | None:
        """The mean to four decimals, as reports show it."""
        return round(self.total / self.count, 4) if self.count > 0 else None
