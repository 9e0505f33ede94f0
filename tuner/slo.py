"""A scenario's SLO verdict: made once, where its requests are judged (:mod:`tuner.bench`), and read as it is by
the study, the search, the trial record and every view.

Three states, one rule (:meth:`SloVerdict.decide`), on the attainment's interval at the benchmark's confidence:

* **missed**: the interval's upper end is below the required share: confidently short of the promise;
* **met**: its lower end clears the required share: shown to keep it;
* **undecided**: neither: the requests measured cannot tell.

The search gives an undecided config the benefit of the doubt (it stays feasible: :attr:`SloVerdict.holds`); an
answer to deploy needs **met**. Beside the share, the *margin* is how far a config is from its promise, a number
a sampler can learn from where a share near 0 or 1 is flat: per request its worst latency ratio (the largest of
TTFT / its limit, TPOT / its limit, E2E / its limit), and the margin is the log of that ratio's quantile at the
required share (``<= 0``: the promise holds), with that quantile's interval. The attainment interval and the
quantile interval are two views of one binomial count (exact, equal tails), so they agree on "missed" but at ties.

Dependency-free: the verdict is data, read from a result or from a stored trial alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MET", "MISSED", "SLO_STATES", "UNDECIDED", "SloVerdict"]

MET = "met"
MISSED = "missed"
UNDECIDED = "undecided"
SLO_STATES = (MET, UNDECIDED, MISSED)

#: The smallest positive constraint: a miss whose margin's interval touches zero (a tie) still reads as a miss.
_TIE = 1e-6


def _share(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:.4g}%"


@dataclass(frozen=True, kw_only=True)
class SloVerdict:
    """One scenario's verdict on its ``[slo]`` (module docstring)."""

    state: str
    """:data:`MET`, :data:`MISSED` or :data:`UNDECIDED`."""
    required: float
    """The share of requests that must meet every limit."""
    requests: int = 0
    """The requests judged."""
    attainment: float | None = None
    low: float | None = None
    high: float | None = None
    """The attainment's interval at the benchmark's confidence."""
    margin: float | None = None
    """``log`` of the per-request worst latency ratio's quantile at :attr:`required` (<= 0: within the limits)."""
    margin_low: float | None = None
    margin_high: float | None = None
    """That margin's interval (None on a side too few requests allow a bound)."""
    too_short: bool = False
    """A pass ended before its queue filled (:mod:`tuner.bench._steady`): the verdict can be missed, never met."""

    @staticmethod
    def decide(low: float | None, high: float | None, required: float) -> str:
        """The rule: missed when the interval is wholly below ``required``, met when wholly at or above it."""
        if high is not None and high < required:
            return MISSED
        if low is not None and low >= required:
            return MET
        return UNDECIDED

    @property
    def holds(self) -> bool:
        """Not confidently missed: what the search needs to keep a config in (the benefit of the doubt)."""
        return self.state != MISSED

    @property
    def met(self) -> bool:
        """Shown to keep the promise: what an answer to deploy needs."""
        return self.state == MET

    @property
    def constraint(self) -> float:
        """Optuna's constraint value (``<= 0`` feasible): the margin's lower end, so the sampler sees how far and
        which way a config misses, with its sign fixed by :attr:`state` (positive exactly when missed). Without
        a margin, the share short of the target at the interval's upper end."""
        if self.margin_low is not None and math.isfinite(self.margin_low):
            value = self.margin_low
        else:
            value = self.required - (self.high if self.high is not None else 1.0)
        return max(value, _TIE) if self.state == MISSED else min(value, 0.0)

    def figures(self) -> dict[str, Any]:
        """The verdict as the flat figures a scenario's result and a trial record hold (:meth:`read` reads them)."""
        return {
            "attainment": self.attainment,
            "attainment_low": self.low,
            "attainment_high": self.high,
            "slo_verdict": self.state,
            "slo_required": self.required,
            "slo_margin": self.margin,
            "slo_margin_low": self.margin_low,
            "slo_margin_high": self.margin_high,
            "slo_requests": self.requests,
            "slo_too_short": self.too_short,
        }

    @classmethod
    def read(cls, figure: Callable[[str], Any], *, requests: int, required: float | None = None) -> SloVerdict | None:
        """The verdict back from :meth:`figures` (``figure(name)``: None when absent), or None without one.

        Figures recorded before verdicts were kept have only the attainment's interval: the state is then the one
        rule applied to it, against ``required`` (which they did not record either); and no count of the requests
        judged (``requests``, every request then) or whether a pass was too short (it was not)."""
        required = figure("slo_required") or required
        if required is None or figure("attainment") is None:
            return None
        low, high, state = figure("attainment_low"), figure("attainment_high"), figure("slo_verdict")
        return cls(
            state=state if state in SLO_STATES else cls.decide(low, high, required),
            required=required,
            requests=int(figure("slo_requests") or requests),
            attainment=figure("attainment"),
            low=low,
            high=high,
            margin=figure("slo_margin"),
            margin_low=figure("slo_margin_low"),
            margin_high=figure("slo_margin_high"),
            too_short=bool(figure("slo_too_short")),
        )

    def text(self, scenario: str, limits: str) -> str:
        """The verdict in the words every view uses (``limits``: the SLO as a person says it, ``TTFT 1 s``), with
        the margin as a person reads it (the share of the limits the required share of requests stayed within)."""
        share, required = _share(self.attainment), _share(self.required)
        margin = ""
        if self.margin is not None:
            margin = f"; {required} of requests within {math.exp(self.margin):.0%} of the limits"
        if self.state == MISSED:
            return f"misses the SLO in {scenario}: {share} of requests within {limits}, {required} required{margin}"
        interval = f"{_share(self.low)}-{_share(self.high)}"
        if self.state == MET:
            return (
                f"meets the SLO in {scenario}: {share} of {self.requests} requests within {limits} ({required} "
                f"required; interval {interval}{margin})"
            )
        short = "; too short: a pass ended before its queue filled" if self.too_short else ""
        return (
            f"not shown to meet the SLO in {scenario}: {share} ({interval}) of {self.requests} requests within "
            f"{limits}, {required} required{margin}{short}"
        )
