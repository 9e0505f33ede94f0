"""A wall-clock budget for a study: ``tune start --hours 8`` or ``--until 07:30``.

The cost model is the mean duration of the trials run so far in the same *branch* of a conditional space (the
values of its branch parameters, e.g. ``algorithm=DFLASH``: DFLASH and DDTree configs load and benchmark at
different speeds), or of all trials when the branch has none yet. A trial the model says would end after the
deadline is never started; the first trial (no model yet) always starts.

The time left (the progress line's ETA and ``tune status``: :func:`study_eta`, one rule for both) counts restarts
as their own cost: on a real server a restart (the weights loading, several minutes for a big model) may take
longer than the benchmark after it, and every trial left and every visit of the confirmation pays one.

The end-of-study confirmation must end before the deadline too (the recommendation is what the user comes back
for): its two rounds of the top configs (:data:`tuner.study._confirm.ROUNDS` visits of each, a visit costing
about a trial: a restart and every scenario) are kept free, and its race rounds start only while they fit.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig
from tuner.space import Value
from tuner.trials import record_of, write

__all__ = ["UNTIL_DEADLINE", "DeadlineReached", "StudyEta", "TimeBudget", "parse_until", "study_eta"]

#: The trial target of ``--hours``/``--until`` without ``--trials``: run until the deadline.
UNTIL_DEADLINE = 10**9


class DeadlineReached(Exception):
    """The next trial would end after the deadline: the loop stops before starting it."""


def parse_until(text: str, *, now: dt.datetime | None = None) -> float:
    """``HH:MM`` (local time, the next such moment: 07:30 at 23:00 is tomorrow morning) as a Unix time."""
    try:
        hour, minute = (int(x) for x in text.split(":"))
        if not (0 <= hour < 24 and 0 <= minute < 60):
            raise ValueError
    except ValueError:
        raise ValueError(f"--until expects a local time HH:MM (e.g. 07:30), got {text!r}") from None
    now = now or dt.datetime.now()
    at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if at <= now:
        at += dt.timedelta(days=1)
    return at.timestamp()


class TimeBudget:
    """Mean trial time per branch, and whether one more trial fits before the deadline (Unix time)."""

    def __init__(self, *, deadline: float | None, config: StudyConfig) -> None:
        self.deadline = deadline
        self._branch_params = [p.name for p in config.space.branch_params()]
        self._durations: dict[tuple[Value, ...], list[float]] = {}
        self._confirm_visits = confirmation_visits(config)

    def branch(self, params: Mapping[str, Value]) -> tuple[Value, ...]:
        return tuple(params.get(name) for name in self._branch_params)  # type: ignore[misc]

    def record(self, params: Mapping[str, Value], seconds: float) -> None:
        self._durations.setdefault(self.branch(params), []).append(seconds)

    def expected(self, params: Mapping[str, Value] | None = None) -> float | None:
        """Expected seconds of a trial in the branch of ``params`` (None: nothing measured yet)."""
        same = self._durations.get(self.branch(params)) if params is not None else None
        pool = same or [s for runs in self._durations.values() for s in runs]
        return sum(pool) / len(pool) if pool else None

    def remaining_s(self, now: float | None = None) -> float:
        return math.inf if self.deadline is None else self.deadline - (time.time() if now is None else now)

    def reserved_s(self) -> float:
        """Seconds kept for the end-of-study confirmation's rounds (0 without a confirmation or a model)."""
        return self._confirm_visits * (self.expected() or 0.0)

    def fits(self, params: Mapping[str, Value], now: float | None = None) -> bool:
        expected = self.expected(params)
        return expected is None or expected + self.reserved_s() <= self.remaining_s(now)

    def check(self, study: optuna.Study, trial: optuna.Trial, params: Mapping[str, Value]) -> None:
        """Raise :class:`DeadlineReached` (the asked trial told FAIL, its params re-enqueued) when it would end late."""
        from tuner.study._recovery import requeue

        if self.fits(params):
            return
        write(trial, interrupted="deadline: would end after it")
        study.tell(trial, state=TrialState.FAIL)
        requeue(study, study.trials[trial.number])  # a later run starts with it
        confirmation = f" and the confirmation ~{_duration(self.reserved_s())}" if self.reserved_s() else ""
        raise DeadlineReached(
            f"stopping: a trial takes ~{_duration(self.expected(params) or 0)}{confirmation}, "
            f"{_duration(max(0.0, self.remaining_s()))} remain before the deadline"
        )

    def expected_trials(self, now: float | None = None) -> int | None:
        """How many more trials the mean trial time says fit before the deadline (None: no deadline or model)."""
        expected = self.expected()
        if self.deadline is None or not expected:
            return None
        return max(0, int((self.remaining_s(now) - self.reserved_s()) // expected))

    def describe(self) -> str:
        """`` , ~12 more fit before 07:30`` for the progress line ("" without a deadline)."""
        more = self.expected_trials()
        if more is None or self.deadline is None:
            return ""
        return f", ~{more} more fit before {dt.datetime.fromtimestamp(self.deadline):%H:%M}"


@dataclass(frozen=True, kw_only=True)
class StudyEta:
    """The time left of a study: each trial left and each confirmation visit is a restart plus a measurement, at
    the means of the trials so far."""

    restarts: int
    """Trials so far that restarted the server (and recorded how long it took to be ready)."""
    restart_s: float | None
    """Mean seconds of one restart, launch to ready (None: no restart measured yet)."""
    measure_s: float | None
    """Mean seconds of the rest of a trial (benchmark, gate, stopping the old server), the same trials'."""
    trials_left: int
    visits_left: int
    """The end-of-study confirmation's visits (0 when it is done or the study confirms nothing)."""

    @property
    def seconds(self) -> float | None:
        """Seconds left (None: nothing measured yet, or nothing left to run)."""
        if self.restart_s is None or self.measure_s is None or self.trials_left + self.visits_left <= 0:
            return None
        return (self.trials_left + self.visits_left) * (self.restart_s + self.measure_s)

    def text(self) -> str:
        """``~52m15s left: 5 trials and 6 confirmation visits, each a restart (~3m10s, mean of 8) and ~1m35s
        measuring`` ("" when :attr:`seconds` is None)."""
        seconds = self.seconds
        if seconds is None or self.restart_s is None or self.measure_s is None:
            return ""
        visits = f" and {self.visits_left} confirmation visits" if self.visits_left else ""
        restart = f"~{_duration(self.restart_s)}, mean of {self.restarts}"
        return (
            f"~{_duration(seconds)} left: {self.trials_left} trials{visits}, each a restart ({restart}) and "
            f"~{_duration(self.measure_s)} measuring"
        )


def study_eta(
    trials: Iterable[FrozenTrial], config: StudyConfig, *, trials_left: int, confirmed: bool = False
) -> StudyEta:
    """The time left after ``trials`` (the study's so far) with ``trials_left`` trials to run and then the
    confirmation (unless ``confirmed``): the one rule of the progress line's ETA and of ``tune status``.

    A trial's restart is its recorded time to ready; the rest of its wall time (from Optuna's start and end
    stamps) is measuring. A trial that never restarted (a duplicate, a rejected sample) costs nothing and is left
    out; so is one still running."""
    restart: list[float] = []
    rest: list[float] = []
    for t in trials:
        ready = record_of(t).ready_s
        if ready is None or t.datetime_start is None or t.datetime_complete is None:
            continue
        restart.append(ready)
        rest.append(max(0.0, (t.datetime_complete - t.datetime_start).total_seconds() - ready))
    return StudyEta(
        restarts=len(restart),
        restart_s=sum(restart) / len(restart) if restart else None,
        measure_s=sum(rest) / len(rest) if rest else None,
        trials_left=max(0, trials_left),
        visits_left=0 if confirmed else confirmation_visits(config),
    )


def confirmation_visits(config: StudyConfig) -> int:
    """Visits the end-of-study confirmation's fixed rounds take (0: the study confirms nothing)."""
    from tuner.objective import objective_of
    from tuner.study._confirm import ROUNDS

    k = config.search.confirm_top
    # Only a single objective ranks its finalists (a Pareto front has nothing to confirm).
    if k < 2 or len(objective_of(config).directions()) != 1:
        return 0
    # The baseline stands beside them in every round (unless it is a finalist itself: rare, one visit over).
    return (k + int(config.search.confirm_baseline)) * ROUNDS


def _duration(seconds: float) -> str:
    from tuner.study._console import fmt_duration

    return fmt_duration(seconds)
