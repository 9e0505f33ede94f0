"""The objective seam: what a study optimises, told once per kind.

A kind (``[objective] kind``) is one :class:`BaseObjective` subclass in its own module. The study, the search and
every view ask the objective the study's config chose (:func:`objective_of`), never which kind it is: what Optuna is
told (directions, metric names), a trial's value from its scenario results, whether the throughput pruner and the
objective-level repeats apply, any measurement beyond the scenarios on the running server (the max-rate search),
what a confirmation visit measures and the value it confirms, and the figure and speed-up every view prints.

The defaults here are those of a single figure per trial with no interval: a kind that says nothing else still runs
a study end to end (the tests define one in their own file).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from tuner.bench import BaseBenchmark, ScenarioResult
from tuner.config import BenchmarkSection, ObjectiveSection, StudyConfig, Table, register_objective_kind
from tuner.objective._figures import Figure, Speedup
from tuner.stats import Noise

__all__ = ["BaseObjective", "RateBrackets", "Score", "ServerRun", "objective_of", "register"]

Visit = tuple[ScenarioResult, ...]
"""What one confirmation visit of a config measured (its scenarios, or a rate search's passes)."""


@dataclass(frozen=True, kw_only=True)
class Score:
    """A trial's values for Optuna (one per direction) and the figure it took from each scenario."""

    values: tuple[float, ...]
    per_scenario: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ServerRun:
    """What an objective may use to measure beyond the scenarios on the server a trial brought up."""

    bench: BaseBenchmark
    best: FrozenTrial | None
    """The best feasible trial so far (None: none yet)."""
    prune: bool
    """Whether the study prunes: a measurement may stop once the trial is confidently behind ``best``."""
    report: Callable[[float], None]
    """Report the trial's next intermediate value (on the objective's scale)."""
    record: Callable[..., None]
    """Record facts on the trial (:func:`tuner.trials.write`'s keywords)."""
    say: Callable[[str], None]
    describe: Callable[[ScenarioResult], str]
    """A pass's result in the console's words."""


@dataclass(frozen=True, kw_only=True)
class RateBrackets:
    """A rate objective's ``[highest met, lowest missed]`` rates of the recommendation and of the baseline, and
    their ratio (the speed-up every view prints)."""

    scenario: str
    """The open-loop scenario whose rate they are."""
    best: Sequence[float | None] | None
    baseline: Sequence[float | None] | None
    speedup: Speedup | None = None
    visits: int | None = None
    """Rounds of the confirmation both come from (None: each from its own trial)."""


class BaseObjective(abc.ABC):
    """What a study optimises (module docstring). Keyword-only constructor; stateless beyond its config."""

    kind: ClassVar[str]
    throughput_pruning: ClassVar[bool] = False
    """Whether the regression pruner (scenario throughput against the best's) may stop a trial early."""
    measures: ClassVar[bool] = False
    """Whether the objective measures beyond the scenarios on a trial's running server (:meth:`measure`)."""
    races: ClassVar[bool] = False
    """Whether the confirmation runs more rounds while a finalist could still beat the leader."""

    def __init__(self, *, config: StudyConfig) -> None:
        self.config = config
        self.section = config.objective

    @classmethod
    def parse(cls, t: Table, bench: BenchmarkSection) -> ObjectiveSection:
        """``[objective]`` for this kind: the keys it takes, validated (one line naming a key that is wrong)."""
        section = ObjectiveSection(kind=cls.kind, scenario=t.str("scenario", "") or None)
        if section.scenario is not None and section.scenario not in {s.name for s in bench.scenarios}:
            raise t.error("scenario", "a name of [[benchmark.scenarios]]", section.scenario)
        t.finish()
        return section

    @property
    def refines_repeats(self) -> bool:
        """Whether repeats beyond the minimum are decided on the whole objective
        (:func:`tuner.stats.decide_objective`)."""
        return False

    # -- what Optuna is told -------------------------------------------------------------------------------------

    def directions(self) -> list[StudyDirection]:
        return [StudyDirection.MAXIMIZE]

    @abc.abstractmethod
    def metric_names(self) -> list[str]:
        """The study's metric names, one per direction (the dashboard's axis labels)."""

    # -- a trial -------------------------------------------------------------------------------------------------

    @abc.abstractmethod
    def score(self, results: Sequence[ScenarioResult]) -> Score:
        """The trial's values from its scenarios' results."""

    def intermediate(self, results: Sequence[ScenarioResult], reference: FrozenTrial | None) -> float | None:
        """The trial's value after the scenarios measured so far, on the objective's scale (None: this kind
        reports none between scenarios)."""
        return None

    def measure(self, run: ServerRun, results: Sequence[ScenarioResult]) -> Score | None:
        """A measurement beyond the scenarios on the running server (only asked when :attr:`measures`), which then
        is the trial's score (None: the scenarios' :meth:`score` is). May raise
        :class:`~tuner.errors.RegressionPruned`."""
        return None

    def better(self, a: float, b: float) -> float:
        """How much better ``a`` is than ``b``, as a ratio above 1 (either direction): for "behind the best"."""
        if self.directions()[0] == StudyDirection.MINIMIZE:
            return b / a if a > 0 else 0.0
        return a / b if b > 0 else float("inf")

    # -- the end-of-study confirmation ---------------------------------------------------------------------------

    def visit(self, bench: BaseBenchmark, scenarios: Callable[[], Visit], *, leader: FrozenTrial) -> Visit:
        """What a confirmation visit measures on a fresh restart: the scenarios, by default (``leader``: the best
        trial before the confirmation, the same for every config)."""
        return scenarios()

    def confirmed_value(self, visits: Sequence[Visit], noise: Mapping[str, Noise | None]) -> float:
        """A config's value over its visits: by default the worst visit's score (a figure that held after every
        restart)."""
        values = [self.score(v).values[0] for v in visits]
        worst = max if self.directions()[0] == StudyDirection.MINIMIZE else min
        return worst(values)

    def confirmed_figures(self, visits: Sequence[Visit], noise: Mapping[str, Noise | None]) -> dict[str, Any]:
        """What the study records of a config's visits, for the side-by-side speed-up ({}: nothing more)."""
        return {}

    def contenders(
        self, alive: Sequence[FrozenTrial], visits: Mapping[int, Sequence[ScenarioResult]],
        noise: Mapping[str, Noise | None],
    ) -> list[FrozenTrial]:  # fmt: skip
        """The finalists still in the race after the fixed rounds (only asked when :attr:`races`)."""
        return list(alive[:1])

    # -- what the views print --------------------------------------------------------------------------------------

    def format(self, value: float) -> str:
        """One value of the objective as the views print it."""
        return f"{value:.3g}"

    def facts(self, t: FrozenTrial) -> dict[str, Any]:
        """What this kind adds to a trial's JSON (``tune best --json``, ``status --json``, ``export``), as numbers."""
        return {}

    def figure(self, t: FrozenTrial) -> Figure | None:
        """The trial's one figure (None: it has no single value to show)."""
        if t.state != TrialState.COMPLETE or not t.values or len(t.values) != 1:
            return None
        return Figure(score=t.values[0], digits=3)

    def speedup(self, study: optuna.Study, best: FrozenTrial, baseline: FrozenTrial) -> Speedup | None:
        """``best`` against the baseline, better above 1: by default the ratio of the two trials' values."""
        if baseline.state != TrialState.COMPLETE or not best.values or not baseline.values:
            return None
        ratio = self.better(best.values[0], baseline.values[0])
        return Speedup(ratio=ratio, low=None, high=None)

    def brackets(self, study: optuna.Study, best: FrozenTrial, baseline: FrozenTrial | None) -> RateBrackets | None:
        """A rate objective's brackets of the recommendation and the baseline (None: not a rate objective)."""
        return None

    def describe(self, repeats: str) -> str:
        """The objective in one sentence (the dashboard's study note; ``repeats``: how each scenario is repeated)."""
        direction = "Minimise" if self.directions()[0] == StudyDirection.MINIMIZE else "Maximise"
        return f"{direction} {', '.join(self.metric_names())}."


_KINDS: dict[str, type[BaseObjective]] = {}


def register(kind: type[BaseObjective]) -> type[BaseObjective]:
    """Make ``kind`` what ``[objective] kind = "<kind.kind>"`` chooses (a class decorator)."""
    _KINDS[kind.kind] = kind
    register_objective_kind(kind.kind, kind.parse)
    return kind


def objective_of(config: StudyConfig) -> BaseObjective:
    """The objective ``config`` chose."""
    try:
        kind = _KINDS[config.objective.kind]
    except KeyError:
        raise ValueError(f"no objective kind {config.objective.kind!r} is registered") from None
    return kind(config=config)
