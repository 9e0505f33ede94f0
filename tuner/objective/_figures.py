"""A trial's figure and a speed-up over the baseline: the two numbers every view prints for an objective."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Figure", "Speedup"]


@dataclass(frozen=True, kw_only=True)
class Figure:
    """A trial's objective with its interval: ``point`` ± ``half_width``, whose lower end ``score`` is what ranks
    (a rate: the highest met, with the lowest ``missed`` above it)."""

    score: float
    point: float | None = None
    missed: float | None = None
    """A rate objective's lowest rate the trial missed the SLO at, above ``score`` (None: not a rate)."""
    unit: str = ""
    """Said after the figure (``req/s``); a throughput figure says none."""
    digits: int = 1

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (the interval is ``point * exp(-h) .. point * exp(h)``, ``score`` its low)."""
        if self.point is None or self.point <= 0 or self.score <= 0 or self.point < self.score:
            return None
        high = self.point * self.point / self.score
        return (high - self.score) / 2.0

    @property
    def text(self) -> str:
        if self.unit:
            missed = f" (misses at {self.missed:.3g})" if self.missed is not None else ""
            return f"{self.score:.3g} {self.unit}{missed}"
        hw = self.half_width
        d = self.digits
        if self.point is None or hw is None:
            return f"{self.score:.{d}f}"
        return f"{self.score:.{d}f} ({self.point:.{d}f} ± {hw:.{d}f})"


@dataclass(frozen=True, kw_only=True)
class Speedup:
    """``ratio`` of two figures (the recommendation's over the baseline's, better above 1) with its interval at the
    study's confidence."""

    ratio: float
    low: float | None
    high: float | None
    side_by_side: bool = False
    """Both figures from the same confirmation rounds (else: each from its own trial, hours apart)."""
    baseline_visits: int | None = None
    """Rounds the baseline was re-measured in, beside the recommendation (side by side only)."""
    baseline_misses: str | None = None
    """Why the baseline breaks the study's SLO (None: it keeps it, or there is none): then it is no alternative,
    whatever the ratio says."""

    @property
    def text(self) -> str:
        if self.low is None or self.high is None:
            return f"{self.ratio:.2f}x"
        return f"{self.ratio:.2f}x ({self.low:.2f}-{self.high:.2f})"

    @property
    def within_noise(self) -> bool:
        return self.low is not None and self.high is not None and self.low <= 1.0 <= self.high

    @property
    def confident(self) -> bool:
        """Confidently better than the baseline: the interval's lower end above 1."""
        return self.low is not None and self.low > 1.0

    @property
    def basis(self) -> str:
        if self.side_by_side:
            times = "once" if self.baseline_visits == 1 else f"{self.baseline_visits} times"
            return f"measured side by side in the confirmation (baseline re-measured {times})"
        return "against the baseline's own trial (not side by side)"

    def as_json(self) -> dict[str, Any]:
        rounded = {k: round(v, 4) if v is not None else None for k, v in (("low", self.low), ("high", self.high))}
        return {
            "ratio": round(self.ratio, 4),
            **rounded,
            "text": self.text,
            "confident": self.confident,
            "side_by_side": self.side_by_side,
            "baseline_visits": self.baseline_visits,
            "basis": self.basis,
            "baseline_misses_slo": self.baseline_misses,
        }
