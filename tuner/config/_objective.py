"""``[objective]``: which kind of objective a study optimises, and the keys each kind takes.

The kinds `tune` ships are parsed here, so a study file loads without the objective package (pure data); what
each kind *does* is :mod:`tuner.objective`'s. A kind defined elsewhere brings its own parser
(:func:`register_objective_kind`, which :func:`tuner.objective.register` calls).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tuner.config._reader import Table
from tuner.config._sections import BenchmarkSection
from tuner.metrics import OBJECTIVE_METRICS

__all__ = [
    "GOODPUT_METRICS",
    "ObjectiveSection",
    "parse_objective",
    "precision_share",
    "register_objective_kind",
]


@dataclass(frozen=True, kw_only=True)
class ObjectiveSection:
    kind: str = "geomean"
    """``geomean``: weighted geometric mean of per-scenario scores; ``multi``: one objective per entry;
    ``goodput``: the geomean of the scenarios' goodput (the rate of the requests that met the SLO); ``max_rate``:
    the highest rate of a scenario that keeps its SLO; or a kind registered by :func:`register_objective_kind`."""
    metric: str = "output_tok_s"
    """``output_tok_s`` (aggregate output tokens/s) or ``per_stream_tok_s``; for ``goodput`` the registry's
    ``goodput_rps`` or ``goodput_tok_s`` (:data:`GOODPUT_METRICS`)."""
    objectives: tuple[str, ...] = ()
    """For ``multi``: the scenario names, each maximised."""
    scenario: str | None = None
    """For ``max_rate``: the open-loop scenario whose rate is searched (its SLO is the promise)."""
    rate_steps: int = 6
    """For ``max_rate``: the rate search's steps per trial."""


Parser = Callable[[Table, BenchmarkSection], ObjectiveSection]
"""Reads one kind's ``[objective]`` table (``kind`` already read) into its section."""


@dataclass(frozen=True)
class _Kind:
    parse: Parser
    per_scenario: bool
    """Each scenario is an objective of its own (``multi``), not a term of one combined figure."""


_KINDS: dict[str, _Kind] = {}


def register_objective_kind(kind: str, parse: Parser, *, per_scenario: bool = False) -> None:
    """Make ``[objective] kind = "<kind>"`` valid, its keys read by ``parse``. The kinds `tune` ships keep their
    own parsers: registering one of them again changes nothing."""
    _KINDS.setdefault(kind, _Kind(parse=parse, per_scenario=per_scenario))


def parse_objective(t: Table | None, bench: BenchmarkSection) -> ObjectiveSection:
    if t is None:
        return ObjectiveSection()
    kind = t.choice("kind", tuple(_KINDS), "geomean")
    return _KINDS[kind].parse(t, bench)


def _scenario_names(t: Table, bench: BenchmarkSection) -> tuple[str, ...]:
    objectives = t.str_list("objectives", ())
    known = {s.name for s in bench.scenarios}
    for name in objectives:
        if name not in known:
            raise t.error("objectives", "names of [[benchmark.scenarios]]: " + ", ".join(sorted(known)), name)
    return objectives


def _throughput_metric(t: Table) -> str:
    return t.choice("metric", tuple(m for m in OBJECTIVE_METRICS if m not in GOODPUT_METRICS), "output_tok_s")


def _parse_geomean(t: Table, bench: BenchmarkSection) -> ObjectiveSection:
    """``kind = "geomean"``: the weighted geometric mean of the scenarios' ``metric``."""
    section = ObjectiveSection(kind="geomean", metric=_throughput_metric(t), objectives=_scenario_names(t, bench))
    t.finish()
    return section


def _parse_multi(t: Table, bench: BenchmarkSection) -> ObjectiveSection:
    """``kind = "multi"``: each of ``objectives`` (scenario names, at least two) maximised on its own."""
    objectives = _scenario_names(t, bench)
    if len(objectives) < 2:
        raise t.error("objectives", "at least two scenario names for kind = 'multi'", list(objectives))
    section = ObjectiveSection(kind="multi", metric=_throughput_metric(t), objectives=objectives)
    t.finish()
    return section


#: ``kind = "goodput"``: its ``metric`` as the study file says it, and the registry's metric it scores.
GOODPUT_METRICS = {"goodput_rps": "rps", "goodput_tok_s": "output_tok_s"}


def _parse_goodput(t: Table, bench: BenchmarkSection) -> ObjectiveSection:
    """``kind = "goodput"``: per scenario the rate of the requests that met the SLO (``metric = "rps"``, the
    default, or ``"output_tok_s"``), geomean-weighted; every weighted scenario needs an SLO to be judged by."""
    said = t.choice("metric", tuple(GOODPUT_METRICS.values()), "rps")
    unjudged = [s.name for s in bench.scenarios if s.weight > 0 and s.slo is None]
    if unjudged:
        raise t.error(
            "kind", f"an [slo] section (or a [benchmark.scenarios.slo] for {', '.join(unjudged)}) for 'goodput'",
            "goodput",
        )
    t.finish()
    metric = next(k for k, v in GOODPUT_METRICS.items() if v == said)
    return ObjectiveSection(kind="goodput", metric=metric)


def _parse_max_rate(t: Table, bench: BenchmarkSection) -> ObjectiveSection:
    """``kind = "max_rate"``: per trial, the highest rate of ``scenario`` (an open-loop scenario with an SLO; by
    default the first) at which the SLO holds, searched in at most ``rate_steps`` steps on the running server."""
    judged = [s.name for s in bench.scenarios if s.rate is not None and s.slo is not None]
    name = t.str("scenario", judged[0] if judged else "")
    if name not in judged:
        expected = "an open-loop scenario (rate) with an SLO" + (f": one of {', '.join(judged)}" if judged else "")
        raise t.error("scenario", expected, name or None)
    section = ObjectiveSection(kind="max_rate", scenario=name, rate_steps=t.int("rate_steps", 6, min=2, max=20))
    t.finish()
    return section


register_objective_kind("geomean", _parse_geomean)
register_objective_kind("multi", _parse_multi, per_scenario=True)
register_objective_kind("goodput", _parse_goodput)
register_objective_kind("max_rate", _parse_max_rate)


def precision_share(bench: BenchmarkSection, objective: ObjectiveSection) -> float:
    """How much of the objective's ``precision`` each scenario may use (``scenario_precision`` = the product).

    A combined objective's log is ``sum(w_i * log x_i)`` (weights normalised), so independent per-scenario
    half-widths ``h_i`` add up to ``sqrt(sum(w_i**2 * h_i**2))``; every scenario at ``precision /
    sqrt(sum(w_i**2))`` gives exactly ``precision``. Three scenarios weighted 2:1:1 need +-3.3% each for +-2%. A
    study that ranks each scenario on its own (``per_scenario``) gives each ``precision``.
    """
    if _KINDS[objective.kind].per_scenario or not bench.scenarios:
        return 1.0
    return 1.0 / math.sqrt(sum(w * w for w in bench.objective_weights().values()))
