"""A trial's facts, typed: :class:`TrialRecord` is read from an Optuna trial here and only here, and the writers
below are the only code that sets a trial's (or a study's) user attrs.

The storage format is the user attrs :mod:`tuner.trials._attrs` names (flat ``<scenario>.<metric>`` keys, so the
dashboard shows the figures as columns); nothing outside :mod:`tuner.trials` names a key. Per-scenario figures
come from the metric registry (:mod:`tuner.metrics`) generically: a metric added there is in
:attr:`TrialRecord.scenarios` without a change here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.metrics import METRICS, scenario_attrs
from tuner.slo import SloVerdict
from tuner.trials import _attrs as attrs
from tuner.trials._confirmed import CONFIRMATION, confirmation_text
from tuner.trials._outcome import infeasibility, outcome, outcome_text
from tuner.trials._ranking import is_counted, is_feasible
from tuner.trials._verdicts import GateVerdict, gate_pending, gate_verdicts
from tuner.trials._warm import WarmStart
from tuner.trials.adapter import current_trial, storage_of, trial_id

__all__ = [
    "StudyFacts",
    "StudyRecord",
    "TrialFacts",
    "TrialRecord",
    "as_user_attrs",
    "enqueue",
    "record_of",
    "study_record",
    "write",
    "write_scenario",
    "write_stored",
    "write_study",
]

_METRIC_KEYS = frozenset(m.key for m in METRICS)


class TrialFacts(TypedDict, total=False):
    """What a writer may set on a trial: :class:`TrialRecord`'s field names, each stored under its user attr."""

    is_baseline: bool
    seed: int | str
    branch: Mapping[str, Any]
    retry_of: int
    duplicate_of: int
    rejected: bool
    interrupted: str
    command: str
    env: Mapping[str, str]
    failure_phase: str
    failure_reason: str
    failure_kind: str
    evidence: str
    log_tail: str
    ready_s: float
    phase_times: Mapping[str, float]
    benchmark_s: float
    gate_s: float
    gate: str
    correct: bool
    gate_skipped: bool
    gate_deferred: bool
    worker: str
    worker_name: str
    slot: int
    heartbeat: float
    target_fingerprint: str
    score: Mapping[str, float]
    steps: list[str]
    repeats_decided: str
    pruned_skipped: list[str]
    pruning_saved_s: float
    dashboard_feasible: str
    slo_missed: str
    max_rate_rps: float
    max_rate_bracket: list[float | None]
    probes: list[Mapping[str, Any]]
    emulated: Mapping[str, Any]


_TRIAL_KEYS: dict[str, str] = {
    "is_baseline": attrs.BASELINE,
    "seed": attrs.SEED,
    "branch": attrs.BRANCH,
    "retry_of": attrs.RETRY_OF,
    "duplicate_of": attrs.DUPLICATE_OF,
    "rejected": attrs.REJECTED,
    "interrupted": attrs.INTERRUPTED,
    "command": attrs.COMMAND,
    "env": attrs.ENV,
    "failure_phase": attrs.FAILURE_PHASE,
    "failure_reason": attrs.FAILURE_REASON,
    "failure_kind": attrs.FAILURE_KIND,
    "evidence": attrs.EVIDENCE,
    "log_tail": attrs.LOG_TAIL,
    "ready_s": attrs.READY_S,
    "phase_times": attrs.PHASE_TIMES,
    "benchmark_s": attrs.BENCHMARK_S,
    "gate_s": attrs.GATE_S,
    "gate": attrs.GATE,
    "correct": attrs.CORRECT,
    "gate_skipped": attrs.GATE_SKIPPED,
    "gate_deferred": attrs.GATE_DEFERRED,
    "worker": attrs.WORKER,
    "worker_name": attrs.WORKER_NAME,
    "slot": attrs.SLOT,
    "heartbeat": attrs.HEARTBEAT,
    "target_fingerprint": attrs.TARGET_FINGERPRINT,
    "score": attrs.SCORE,
    "steps": attrs.STEPS,
    "repeats_decided": attrs.REPEATS_DECIDED,
    "pruned_skipped": attrs.PRUNED_SKIPPED,
    "pruning_saved_s": attrs.PRUNING_SAVED_S,
    "dashboard_feasible": attrs.DASHBOARD_FEASIBLE,
    "slo_missed": attrs.SLO_MISSED,
    "max_rate_rps": attrs.MAX_RATE,
    "max_rate_bracket": attrs.MAX_RATE_BRACKET,
    "probes": attrs.PROBES,
    "emulated": attrs.EMULATED,
}


def _stored(facts: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in facts.items():
        if isinstance(value, Mapping):
            value = dict(value)
        out[_TRIAL_KEYS[name]] = value
    return out


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """What a trial is and what became of it, as every view reads it (built by :func:`record_of`)."""

    number: int
    state: TrialState
    params: Mapping[str, Any]
    values: tuple[float, ...] | None
    is_baseline: bool = False
    seed: int | None = None
    """The expert seed's index in ``[search] seed_trials`` this trial ran."""
    warm_origin: str | None = None
    """``study#n``: the top config of the warm start's study this trial ran."""
    branch: Mapping[str, Any] | None = None
    retry_of: int | None = None
    duplicate_of: int | None = None
    rejected: bool = False
    interrupted: str | None = None
    command: str | None = None
    """The launch command as run (secrets redacted)."""
    env: Mapping[str, str] | None = None
    failure_phase: str | None = None
    failure_reason: str | None = None
    failure_kind: str | None = None
    evidence: str | None = None
    log_tail: str | None = None
    ready_s: float | None = None
    phase_times: Mapping[str, float] | None = None
    benchmark_s: float | None = None
    gate_s: float | None = None
    gate: str | None = None
    """The gate's words: ``3/5``, ``not run: ...``, ``at the end, if a finalist``."""
    correct: bool | None = None
    gate_skipped: bool = False
    gate_deferred: bool = False
    worker: str | None = None
    """The worker process that runs it (host and pid, :func:`tuner.study` tells whether it is alive)."""
    worker_name: str | None = None
    slot: int | None = None
    heartbeat: float | None = None
    target_fingerprint: str | None = None
    score: Mapping[str, float] | None = None
    steps: tuple[str, ...] = ()
    repeats_decided: str | None = None
    pruned_skipped: tuple[str, ...] | None = None
    pruning_saved_s: float | None = None
    slo_missed: str | None = None
    """Why the trial misses ``[slo]`` (its ``slo`` constraint is then > 0), one line per scenario."""
    max_rate_rps: float | None = None
    """``kind = "max_rate"``: the highest offered rate that kept the SLO (0: none did)."""
    max_rate_bracket: tuple[float | None, float | None] | None = None
    probes: tuple[Mapping[str, Any], ...] = ()
    """Passes of an open-loop scenario at rates other than its own, in the order run: each its ``scenario``,
    ``rate`` and the figures of :data:`tuner.metrics.PROBE_KEYS` (the verdict's and the latency p99s with their
    intervals)."""
    """``[highest met, lowest missed]`` of the rate search (None where the search found no such rate)."""
    emulated: Mapping[str, Any] | None = None
    """The batch cap the client played instead of restarting (``[search] emulate``): ``param``, ``flag``,
    ``server`` (the value the server ran), ``chosen`` and ``caps`` (each value tried, its verdict and passes)."""
    scenarios: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per-scenario figures: scenario -> :mod:`tuner.metrics` key -> value, for every metric the trial recorded."""
    counted: bool = False
    feasible: bool = False
    outcome: str = ""
    """One of :data:`~tuner.trials.OUTCOMES` (a state's name for a trial neither COMPLETE nor PRUNED)."""
    outcome_text: str = ""
    """What became of the trial in a few words, the same in every view."""
    infeasibility: str | None = None
    """Why a measured config is not eligible (``gate 3/5``; None: it is, or it was not measured)."""
    gate_pending: bool = False
    """A trial of a ``[gate] when = "final"`` study with no end-of-study verdict (yet, or ever: only the
    finalists are gated)."""

    def figure(self, scenario: str, key: str) -> Any:
        """The trial's ``key`` figure of ``scenario`` (None when not recorded)."""
        return self.scenarios.get(scenario, {}).get(key)

    def number_figure(self, scenario: str, key: str) -> float | None:
        """:meth:`figure` as a finite number, or None (missing, a flag, not a number)."""
        v = self.figure(scenario, key)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return None
        return float(v)

    def repeats(self, scenario: str) -> list[float]:
        """The per-repeat output tok/s of ``scenario`` (empty when not measured)."""
        raw = self.figure(scenario, "repeats")
        if not isinstance(raw, list):
            return []
        return [float(x) for x in raw if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)]

    def verdict(self, scenario: str, required: float | None = None) -> SloVerdict | None:
        """``scenario``'s SLO verdict as the benchmark made it (None: no SLO there, or nothing judged).

        A trial recorded before verdicts were stored has only the attainment's interval: its verdict is the one
        rule applied to that interval, against ``required`` (the study's share: the trial did not store it)."""

        def figure(name: str) -> Any:
            return self.figure(scenario, name) if name == "slo_verdict" else self.number_figure(scenario, name)

        return SloVerdict.read(figure, requests=int(self.number_figure(scenario, "requests") or 0), required=required)

    def client_bound_scenarios(self) -> list[str]:
        """Scenarios measured while the load generator was the bottleneck: their figures understate the server."""
        return sorted(s for s, figures in self.scenarios.items() if figures.get("client_bound") is True)

    def retry(self, *, baseline: bool = True) -> TrialFacts:
        """What a re-run of this trial's config starts with: that it retries this trial, and where the config came
        from (seed, warm start, branch, and the baseline flag unless ``baseline`` is False)."""
        facts: TrialFacts = {"retry_of": self.number}
        if baseline and self.is_baseline:
            facts["is_baseline"] = True
        seed = self.warm_origin if self.warm_origin is not None else self.seed
        if seed is not None:
            facts["seed"] = seed
        if self.branch is not None:
            facts["branch"] = self.branch
        return facts


def _scenarios(user: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for k, v in user.items():
        scenario, dot, key = k.rpartition(".")
        if dot and key in _METRIC_KEYS:
            out.setdefault(scenario, {})[key] = v
    return out


def _opt(value: Any, kind: type | tuple[type, ...]) -> Any:
    """``value`` when it is a ``kind``, else None (a flag is no number: ``True`` is not an ``int`` here)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return None
    return value if isinstance(value, kinds) else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any) -> float | None:
    v = _opt(value, (int, float))
    return None if v is None else float(v)


def _bracket(value: Any) -> tuple[float | None, float | None] | None:
    if not isinstance(value, list) or len(value) != 2:
        return None
    low, high = (_number(v) for v in value)
    return low, high


def record_of(t: FrozenTrial | optuna.Trial) -> TrialRecord:
    """The trial's facts (a live ``optuna.Trial`` is read as stored now)."""
    frozen = current_trial(t) if isinstance(t, optuna.Trial) else t
    u = frozen.user_attrs
    seed = u.get(attrs.SEED)
    skipped = u.get(attrs.PRUNED_SKIPPED)
    return TrialRecord(
        number=frozen.number,
        state=frozen.state,
        params=frozen.params,
        values=tuple(frozen.values) if frozen.values else None,
        is_baseline=bool(u.get(attrs.BASELINE)),
        seed=_opt(seed, int),
        warm_origin=seed if isinstance(seed, str) else None,
        branch=_opt(u.get(attrs.BRANCH), Mapping),
        retry_of=_opt(u.get(attrs.RETRY_OF), int),
        duplicate_of=_opt(u.get(attrs.DUPLICATE_OF), int),
        rejected=bool(u.get(attrs.REJECTED)),
        interrupted=_text(u.get(attrs.INTERRUPTED) or None),
        command=_text(u.get(attrs.COMMAND)),
        env=_opt(u.get(attrs.ENV), Mapping),
        failure_phase=_text(u.get(attrs.FAILURE_PHASE)),
        failure_reason=_text(u.get(attrs.FAILURE_REASON)),
        failure_kind=_text(u.get(attrs.FAILURE_KIND)),
        evidence=_text(u.get(attrs.EVIDENCE)),
        log_tail=_text(u.get(attrs.LOG_TAIL)),
        ready_s=_number(u.get(attrs.READY_S)),
        phase_times=_opt(u.get(attrs.PHASE_TIMES), Mapping),
        benchmark_s=_number(u.get(attrs.BENCHMARK_S)),
        gate_s=_number(u.get(attrs.GATE_S)),
        gate=_text(u.get(attrs.GATE)),
        correct=_opt(u.get(attrs.CORRECT), bool),
        gate_skipped=bool(u.get(attrs.GATE_SKIPPED)),
        gate_deferred=bool(u.get(attrs.GATE_DEFERRED)),
        worker=_text(u.get(attrs.WORKER)),
        worker_name=_text(u.get(attrs.WORKER_NAME)),
        slot=_opt(u.get(attrs.SLOT), int),
        heartbeat=_number(u.get(attrs.HEARTBEAT)),
        target_fingerprint=_text(u.get(attrs.TARGET_FINGERPRINT)),
        score=_opt(u.get(attrs.SCORE), Mapping),
        steps=tuple(str(s) for s in u.get(attrs.STEPS) or ()),
        repeats_decided=_text(u.get(attrs.REPEATS_DECIDED)),
        pruned_skipped=tuple(str(s) for s in skipped) if isinstance(skipped, list) else None,
        pruning_saved_s=_number(u.get(attrs.PRUNING_SAVED_S)),
        slo_missed=_text(u.get(attrs.SLO_MISSED)),
        max_rate_rps=_number(u.get(attrs.MAX_RATE)),
        max_rate_bracket=_bracket(u.get(attrs.MAX_RATE_BRACKET)),
        probes=tuple(p for p in u.get(attrs.PROBES) or () if isinstance(p, Mapping)),
        emulated=_opt(u.get(attrs.EMULATED), Mapping),
        scenarios=_scenarios(u),
        counted=is_counted(frozen),
        feasible=is_feasible(frozen),
        outcome=outcome(frozen),
        outcome_text=outcome_text(frozen),
        infeasibility=infeasibility(frozen),
        gate_pending=gate_pending(frozen),
    )


def write(trial: optuna.Trial, **facts: Unpack[TrialFacts]) -> None:
    """Record ``facts`` on the trial this process asked for."""
    for key, value in _stored(facts).items():
        trial.set_user_attr(key, value)


def write_stored(study: optuna.Study, trial: optuna.Trial | FrozenTrial | int, **facts: Unpack[TrialFacts]) -> None:
    """Record ``facts`` on a RUNNING trial known by its object or id, whichever process or thread holds it."""
    tid = trial if isinstance(trial, int) else trial_id(trial)
    for key, value in _stored(facts).items():
        storage_of(study).set_trial_user_attr(tid, key, value)


def write_scenario(trial: optuna.Trial, result: Any) -> None:
    """Record one :class:`~tuner.bench.ScenarioResult`'s figures, every metric of the registry."""
    # Each attr is a commit of the study's database (about 2 ms on SQLite, 60 metrics a scenario): a figure the
    # scenario does not have (a closed-loop pass's SLO figures) is left out, as readers take an absent key for
    # None, and a scenario recorded again after the objective's repeats writes only the figures that changed.
    held = trial.user_attrs
    for key, value in scenario_attrs(result).items():
        if held.get(key) != value:
            trial.set_user_attr(key, value)


def as_user_attrs(**facts: Unpack[TrialFacts]) -> dict[str, Any]:
    """``facts`` in their stored form, for a trial built whole (``optuna.trial.create_trial``)."""
    return _stored(facts)


def enqueue(
    study: optuna.Study, params: Mapping[str, Any], *, skip_if_exists: bool = False, **facts: Unpack[TrialFacts]
) -> None:
    """Queue ``params`` as a trial that starts with ``facts`` recorded (where the config came from)."""
    study.enqueue_trial(dict(params), user_attrs=_stored(facts), skip_if_exists=skip_if_exists)


class StudyFacts(TypedDict, total=False):
    """What a writer may set on a study: :class:`StudyRecord`'s field names."""

    target_trials: int
    confirm_top: int
    pruning_saved_s: float
    warmups: str
    warm_start: Mapping[str, Any]
    confirmation: Mapping[str, Any]
    fingerprint: str
    config_text: str
    config_source: str
    config_dir: str


_STUDY_KEYS: dict[str, str] = {
    "target_trials": attrs.TARGET_TRIALS,
    "confirm_top": attrs.CONFIRM_TOP,
    "pruning_saved_s": attrs.PRUNING_SAVED_S,
    "warmups": attrs.WARMUPS,
    "warm_start": attrs.WARM_START,
    "confirmation": CONFIRMATION,
    "fingerprint": attrs.STUDY_FINGERPRINT,
    "config_text": attrs.CONFIG_TEXT,
    "config_source": attrs.CONFIG_SOURCE,
    "config_dir": attrs.CONFIG_DIR,
}


@dataclass(frozen=True, kw_only=True)
class StudyRecord:
    """What a study records about itself (built by :func:`study_record`)."""

    target_trials: int | None = None
    """How many trials ``tune start`` was asked for (``--trials`` or the file's)."""
    confirm_top: int | None = None
    pruning_saved_s: float | None = None
    warmups: str | None = None
    """What ``[benchmark] warmup = "auto"`` concluded per scenario when the study last stopped."""
    warm_start: WarmStart | None = None
    confirmation: Mapping[str, Any] | None = None
    fingerprint: str | None = None
    """The study file's fingerprint (what a resumed study must still match)."""
    config_text: str | None = None
    config_source: str | None = None
    config_dir: str | None = None
    gate_verdicts: Mapping[int, GateVerdict] = field(default_factory=dict)
    """The end-of-study gate verdicts, by trial number."""
    confirmation_text: str | None = None
    """One line on what re-measuring the top decided (None: no confirmation recorded)."""


def study_record(study: optuna.Study) -> StudyRecord:
    u = study.user_attrs
    warm = u.get(attrs.WARM_START)
    return StudyRecord(
        target_trials=_opt(u.get(attrs.TARGET_TRIALS), int),
        confirm_top=_opt(u.get(attrs.CONFIRM_TOP), int),
        pruning_saved_s=_number(u.get(attrs.PRUNING_SAVED_S)),
        warmups=_opt(u.get(attrs.WARMUPS), str),
        warm_start=WarmStart.from_attr(warm) if isinstance(warm, Mapping) else None,
        confirmation=_opt(u.get(CONFIRMATION), Mapping),
        fingerprint=_opt(u.get(attrs.STUDY_FINGERPRINT), str),
        config_text=_opt(u.get(attrs.CONFIG_TEXT), str),
        config_source=_opt(u.get(attrs.CONFIG_SOURCE), str),
        config_dir=_opt(u.get(attrs.CONFIG_DIR), str),
        gate_verdicts=gate_verdicts(study),
        confirmation_text=confirmation_text(study),
    )


def write_study(study: optuna.Study, **facts: Unpack[StudyFacts]) -> None:
    for name, value in facts.items():
        study.set_user_attr(_STUDY_KEYS[name], dict(value) if isinstance(value, Mapping) else value)
