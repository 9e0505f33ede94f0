"""``[slo]``: the latency a service promises each request, and the share of requests that must get it.

::

    [slo]
    ttft_s = 1.0        # time to first token
    tpot_s = 0.04       # time per output token after the first
    e2e_s = 30.0        # end to end
    attainment = 0.99   # share of requests that must meet every limit given

Any subset of the limits; a request meets the SLO when it meets every one given. A scenario may override keys in
its own ``[benchmark.scenarios.slo]`` table (the rest come from ``[slo]``). Whether a trial meets it is decided
on the scenario's measured attainment with a confidence interval (:mod:`tuner.bench._slo`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tuner.config._reader import Table
from tuner.errors import ConfigError
from tuner.metrics import LATENCY_MEASURES

__all__ = ["LIMITS", "Slo", "parse_slo", "parse_slo_option"]

#: The per-request limits, by key, with the name a sentence uses for each (the registry's latency measures).
LIMITS = {m.limit: m.label for m in LATENCY_MEASURES}


@dataclass(frozen=True, kw_only=True)
class Slo:
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    attainment: float = 0.99
    """Share of requests that must meet every limit given."""

    def limits(self) -> dict[str, float]:
        return {k: v for k, v in ((k, getattr(self, k)) for k in LIMITS) if v is not None}

    def describe(self) -> str:
        """``TTFT 1 s / TPOT 40 ms``: the limits as a person says them."""
        return " / ".join(f"{LIMITS[k]} {_seconds(v)}" for k, v in self.limits().items())

    def ratio(self, *, ttft_s: float | None, tpot_s: float | None, e2e_s: float | None) -> float:
        """One request's worst latency ratio: the largest of each figure over its limit (a figure it lacks, such
        as the TPOT of a one-token answer, cannot miss: 0 when it lacks them all)."""
        got = {"ttft_s": ttft_s, "tpot_s": tpot_s, "e2e_s": e2e_s}
        return max((v / limit for k, limit in self.limits().items() if (v := got[k]) is not None), default=0.0)

    def met(self, *, ttft_s: float | None, tpot_s: float | None, e2e_s: float | None) -> bool:
        """Whether one request met every limit: its worst latency ratio is at most 1."""
        return self.ratio(ttft_s=ttft_s, tpot_s=tpot_s, e2e_s=e2e_s) <= 1.0


def _seconds(value: float) -> str:
    return f"{value * 1000:g} ms" if value < 1 else f"{value:g} s"


def parse_slo(t: Table | None, *, base: Slo | None = None) -> Slo | None:
    """``[slo]`` (``base`` None) or a scenario's override of it; None when neither sets anything."""
    if t is None:
        return base
    out = base or Slo()
    for key in LIMITS:
        value = t.float(key, None)
        if value is not None:
            if value <= 0:
                raise t.error(key, "a number of seconds > 0", value)
            out = replace(out, **{key: value})
    attainment = t.float("attainment", None)
    if attainment is not None:
        if not 0 < attainment <= 1:
            raise t.error("attainment", "a share of requests in (0, 1], such as 0.99", attainment)
        out = replace(out, attainment=attainment)
    t.finish()
    if not out.limits():
        raise t.error_here("at least one limit: " + ", ".join(LIMITS) + " (seconds)")
    return out


_OPTION_KEYS = {**{m.key: m.limit for m in LATENCY_MEASURES}, "attainment": "attainment", "rate": "rate"}
_OPTION_HELP = (
    "KEY=VALUE pairs joined by commas: ttft, tpot, e2e (seconds), attainment (a share), rate (requests/s), "
    "such as ttft=1,tpot=0.04"
)


def parse_slo_option(text: str, *, option: str = "--slo") -> tuple[Slo, float | None]:
    """``ttft=1,tpot=0.04[,e2e=30][,attainment=0.99][,rate=4]`` (a command line's SLO): the SLO, validated as
    ``[slo]`` is, and the open-loop rate to judge it at (None: not given)."""
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, raw = item.partition("=")
        name = _OPTION_KEYS.get(key.strip().removesuffix("_s"))
        try:
            value = float(raw)
        except ValueError:
            value = None
        if not sep or name is None or value is None:
            raise ConfigError(file=None, key=option, expected=_OPTION_HELP, got=item)
        if name in values:  # `ttft=3,ttft=4` keeping one of them silently would hide a typo
            twice = f"{key.strip()} given twice in {text}"
            raise ConfigError(file=None, key=option, expected="each key once", got=twice)
        values[name] = value
    rate = values.pop("rate", None)
    if rate is not None and rate <= 0:
        raise ConfigError(file=None, key=f"{option} rate", expected="requests/s > 0", got=rate)
    slo = parse_slo(Table(values, file=None, key=option))
    assert slo is not None  # parse_slo of a table is never None
    return slo, rate
