"""Money that keeps "unknown": a cost is a sum of dollars until one part has no price, then unknown for good."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cost:
    """Dollars, or None once any part was unknown: an unknown cost is never shown or counted as $0."""

    usd: float | None = 0.0

    def __add__(self, other: Cost | float | None) -> Cost:
        more = other.usd if isinstance(other, Cost) else other
        return Cost(None if self.usd is None or more is None else self.usd + more)

    __radd__ = __add__

    @property
    def known(self) -> bool:
        return self.usd is not None

    def rounded(self, digits: int = 6) -> float | None:
        """The dollars as stored and printed in --json: rounded, or None when unknown."""
        return None if self.usd is None else round(self.usd, digits)

    def text(self) -> str:
        """`$0.1234`, or `unknown`."""
        return "unknown" if self.usd is None else f"${self.usd:.4f}"


UNKNOWN = Cost(None)
