"""The warm start: another study's results as this one's starting point (``[search] warm_start``, ``--warm-start``).

The other study (same storage or another) is read once, when this study enqueues its starting points:

* its counted trials are mapped onto this space: parameters this space no longer has are dropped, parameters it
  added take this study's baseline value, and a config outside this space (a value out of range, a broken
  constraint) is left out with the reason;
* its top configs (its recommendation first) run right after this study's baseline;
* with ``[search] warm_start_prior``, all of its mapped trials become the sampler's prior
  (:class:`tuner.search.PriorSampler`), their values scaled to this study's measurements by the configs both
  studies measured (the baseline first): what was 20% above the other study's baseline is 20% above this one's,
  until configs measured here say otherwise.

What was carried over is stored as one study attr (:class:`tuner.trials.WarmStart`), read by the sampler on every
resume and by the report; none of it is a trial of this study, so nothing carried over is ever counted, ranked or
recommended.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig, default_storage
from tuner.errors import TuneError
from tuner.objective import objective_of
from tuner.search import Prior
from tuner.space import Param, SearchSpace, Value, format_value, param_distribution
from tuner.study._faults import masked_url
from tuner.study._starts import config_key, same_config
from tuner.study._storage import NoSuchStudy, load_existing
from tuner.trials import (
    CarriedTrial,
    WarmStart,
    candidates,
    is_counted,
    recommended,
    record_of,
    study_record,
    study_trials,
)

__all__ = ["map_config", "prior_scale", "read_warm_start", "warm_prior"]


def read_warm_start(config: StudyConfig, *, storage: str) -> WarmStart:
    """The other study's trials on this space, and the top configs to run first (nothing is written)."""
    search = config.search
    assert search.warm_start is not None
    url = _where(config, storage)
    if search.warm_start == config.study.name and url == storage:
        raise TuneError(f"study {search.warm_start!r} cannot warm-start from itself: name another study")
    try:
        other = load_existing(url, search.warm_start)
    except NoSuchStudy as exc:
        hint = "" if search.warm_start_storage else " (name its storage: --warm-start-storage or warm_start_storage)"
        missing = url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists()
        text = f"no study database at {url.removeprefix('sqlite:///')}" if missing else str(exc)
        raise NoSuchStudy(f"warm start from {search.warm_start}: {text}{hint}") from None
    mapped: list[tuple[FrozenTrial, dict[str, Value]]] = []
    skipped: list[str] = []
    added: dict[str, Value] = {}
    for t in (t for t in study_trials(other) if is_counted(t)):
        params = map_config(config.space, config.baseline, t.params, added=added)
        if isinstance(params, str):
            skipped.append(f"#{t.number}: {params}")
        else:
            mapped.append((t, params))
    names = {p.name for p in config.space.params}
    dropped = sorted({k for t in study_trials(other) for k in t.params} - names)
    comparable = other.directions == objective_of(config).directions()
    carried = [_carried(t, params) for t, params in mapped]
    return WarmStart(
        study=other.study_name,
        storage=masked_url(url),
        trials=tuple(carried) if comparable else (),
        top=_top(other, {t.number: t for t in carried}, config),
        skipped=tuple(skipped),
        dropped=tuple(dropped),
        added=added,
        note=None if comparable or not search.warm_start_prior else "its objectives differ from this study's: only "
        "its top configs run here",
        prior=comparable and search.warm_start_prior,
    )


def _where(config: StudyConfig, storage: str) -> str:
    """The other study's storage: as given; else this study's if it holds it, else where a study file next to
    this one keeps a study of that name (``runs/NAME/study.db``)."""
    search = config.search
    assert search.warm_start is not None
    if search.warm_start_storage is not None:
        return search.warm_start_storage
    own = default_storage(config.base_dir, search.warm_start)
    if storage != own and own.startswith("sqlite:///") and Path(own.removeprefix("sqlite:///")).exists():
        with contextlib.suppress(NoSuchStudy):
            load_existing(storage, search.warm_start)
            return storage
        return own
    return storage


def map_config(
    space: SearchSpace, baseline: Mapping[str, Value], params: Mapping[str, Value], *, added: dict[str, Value]
) -> dict[str, Value] | str:
    """Another study's ``params`` as a config of ``space``, or why they are not one.

    Parameters the space does not have are dropped; an active parameter the other study did not set takes the
    baseline's value (recorded in ``added``). A value outside the space, or a broken constraint, is a reason.
    """
    out: dict[str, Value] = {}
    for p in space.params:
        if not p.active(out):
            continue
        if p.name in params:
            value = params[p.name]
            if p.kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
                value = float(f"{value:.10g}")  # Optuna's step arithmetic leaves 0.7999999999999999 for 0.8
            if not p.contains(value):
                return f"{p.name}={format_value(value)} is outside this space ({_domain(p)})"
        elif p.name in baseline:
            value = added.setdefault(p.name, baseline[p.name])
        else:
            return f"{p.name} is new here and this study's baseline does not set it"
        out[p.name] = value
    if broken := space.violations(out):
        return "breaks " + ", ".join(str(c) for c in broken)
    return out


def _domain(p: Param) -> str:
    if p.kind in ("categorical", "bool"):
        return "one of " + ", ".join(format_value(c) for c in (p.choices or (False, True)))
    assert p.low is not None and p.high is not None
    return f"{format_value(p.low)}..{format_value(p.high)}" + (f" step {format_value(p.step)}" if p.step else "")


def _carried(t: FrozenTrial, params: dict[str, Value]) -> CarriedTrial:
    # A config the other study did not gate because it was behind its best was still measured: its speed counts.
    measured = t.state == TrialState.COMPLETE and (record_of(t).feasible or record_of(t).gate_skipped)
    return CarriedTrial(
        number=t.number,
        params=params,
        values=tuple(t.values) if measured and t.values else None,
        baseline=bool(record_of(t).is_baseline),
    )


def _top(other: optuna.Study, carried: Mapping[int, CarriedTrial], config: StudyConfig) -> tuple[CarriedTrial, ...]:
    """The other study's best distinct configs on this space (its recommendation first), but this baseline."""
    rec = recommended(other)
    ranked = ([rec.trial] if rec is not None else []) + candidates(other)
    chosen: list[CarriedTrial] = []
    seen = [same_config(config, dict(config.baseline))]
    for t in ranked:
        mine = carried.get(t.number)
        if mine is None or same_config(config, mine.params) in seen or len(chosen) >= config.search.warm_start_top:
            continue
        seen.append(same_config(config, mine.params))
        chosen.append(mine)
    return tuple(chosen)


# -- the prior -----------------------------------------------------------------------------------------------


def warm_prior(config: StudyConfig) -> Prior:
    """The warm start's trials as the sampler sees them: this space's distributions, values on this study's scale.

    Read from the study attr on first use (a fleet's other worker may write it a moment later), then kept; empty
    until the study has measured a config both studies measured (its baseline is the first).
    """
    distributions = {p.name: param_distribution(p) for p in config.space.params}
    found: list[WarmStart] = []

    def prior(study: optuna.Study) -> list[FrozenTrial]:
        if not found and (warm := study_record(study).warm_start) is not None:
            found.append(warm)
        if not found or not found[0].trials or not found[0].prior:
            return []
        scale = prior_scale(study, found[0])
        if scale is None:
            return []
        return [_frozen(t, scale, distributions) for t in found[0].trials]

    return prior


def prior_scale(study: optuna.Study, warm: WarmStart) -> list[float] | None:
    """Per objective, what this study measures relative to the other, on the configs both measured.

    The geometric mean of the ratios over the pairs: the two baselines (the same command on two servers), and
    every carried config measured here too (the warm start's top configs, run first). So a prior that the first
    configs measured here contradict loses its pull: its values drop below this study's own.
    """
    carried = {config_key(t.params): t.values for t in warm.trials if t.values}
    other_baseline = next((t.values for t in warm.trials if t.baseline and t.values), None)
    logs: list[list[float]] = []
    for t in study_trials(study):
        if not (is_counted(t) and t.state == TrialState.COMPLETE and t.values and min(t.values) > 0):
            continue
        theirs = other_baseline if record_of(t).is_baseline else carried.get(config_key(t.params))
        if theirs and len(theirs) == len(t.values) and min(theirs) > 0:
            logs.append([math.log(a / b) for a, b in zip(t.values, theirs, strict=True)])
    if not logs:
        return None
    return [math.exp(sum(column) / len(logs)) for column in zip(*logs, strict=True)]


def _frozen(t: CarriedTrial, scale: Sequence[float], distributions: Mapping[str, object]) -> FrozenTrial:
    dists = {k: distributions[k] for k in t.params}
    if t.values is None:
        return optuna.trial.create_trial(state=TrialState.PRUNED, params=t.params, distributions=dists)  # type: ignore[arg-type]
    values = [v * s for v, s in zip(t.values, scale, strict=True)]
    return optuna.trial.create_trial(values=values, params=t.params, distributions=dists)  # type: ignore[arg-type]
