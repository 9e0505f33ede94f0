"""The chosen config in a form to act on: a systemd drop-in, a shell command line, or JSON."""

from __future__ import annotations

import posixpath
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.config import StudyConfig, base_spec, launch_spec
from tuner.errors import TuneError
from tuner.metrics import METRICS
from tuner.objective import objective_of
from tuner.report._facts import compare_scenarios, figure_text, study_speedup
from tuner.report._slo import slo_object
from tuner.trials import Outcome, baseline_trial, is_counted, recommended, record_of, study_trials

__all__ = [
    "FORMATS",
    "choose_trial",
    "export_dropin",
    "export_json",
    "export_text",
    "launch_text",
    "secrets_note",
]

FORMATS = ("dropin", "command", "json")


def choose_trial(study: optuna.Study, number: int | None = None) -> FrozenTrial:
    """The recommended trial (:func:`tuner.trials.recommended`), or trial ``number``.

    An explicitly named trial is returned whatever became of it (the caller labels it); the recommendation is
    always feasible.
    """
    if number is None:
        rec = recommended(study)
        if rec is None:
            raise TuneError(f"study {study.study_name!r} has no feasible completed trial yet: nothing to export")
        return rec.trial
    trials = study_trials(study)
    if not 0 <= number < len(trials):
        raise TuneError(f"study {study.study_name!r} has no trial #{number} (it holds {len(trials)})")
    t = trials[number]
    if not t.params:
        raise TuneError(f"trial #{number} has no parameters ({t.state.name}): nothing to export")
    return t


def launch_text(config: StudyConfig, t: FrozenTrial) -> str:
    """What the trial ran as one shell line to show: its secrets ``***`` (:func:`launch_spec` has the values)."""
    return config.secrets.spec(launch_spec(config, t)).shell_text()


def secrets_note(config: StudyConfig, t: FrozenTrial) -> str | None:
    """What a deployment of trial ``t`` must be given: the secrets an export shows as ``***`` (None: none)."""
    names = config.secrets.names(launch_spec(config, t))
    if not names:
        return None
    return (
        f"{' and '.join(names)} {'is a secret' if len(names) == 1 else 'are secrets'}, shown as ***: supply "
        "the real value (it is in the study file or the environment, never in the study)"
    )


def _header(study: optuna.Study, config: StudyConfig, t: FrozenTrial) -> list[str]:
    names = ", ".join(study.metric_names or []) or "score"
    lines = [f"# tune: trial #{t.number} of study {study.study_name} ({names}: {figure_text(t, config)})"]
    rec = recommended(study)
    if rec is None or rec.trial.number != t.number:
        lines.append(f"# WARNING: not the recommended config (this trial: {Outcome.text(t)})")
    else:
        missing = rec.missing()
        lines += [f"# NOT VERIFIED: {m}" for m in missing]
    return lines


def export_dropin(study: optuna.Study, config: StudyConfig, t: FrozenTrial) -> str:
    """A systemd drop-in (``[Service]``, ``ExecStart=`` reset, the command, ``Environment=`` lines)."""
    from tuner.target.services import dropin_text

    spec = config.secrets.spec(launch_spec(config, t))
    base = base_spec(config.target)
    # Variables the base sets but this config leaves out (an "absent" choice) must be unset, or the unit's own
    # Environment= line would still apply them.
    unset = sorted(k for k in base.env if k not in spec.env)
    try:
        text = dropin_text(spec, unset=unset)
    except ValueError as exc:
        raise TuneError(f"trial #{t.number} cannot be written as a systemd drop-in: {exc}") from None
    body = [line for line in text.splitlines() if not line.startswith("#")]
    hints = []
    sd = config.target.systemd
    if sd is not None:
        path = posixpath.join(sd.unit_dir, f"{sd.unit}.d", "60-tuned.conf")
        hints = [
            f"# Install: sudo install -D -m 0644 THIS_FILE {path}",
            f"#          sudo systemctl daemon-reload && sudo systemctl restart {sd.unit}",
        ]
    else:
        hints = ["# The study's target is not a systemd unit; put this in UNIT.d/60-tuned.conf to use it as one."]
    if note := secrets_note(config, t):
        hints.insert(0, f"# SUPPLY: {note}; or keep them out of this file, in an EnvironmentFile= the unit reads")
    return "\n".join([*_header(study, config, t), *hints, *body]) + "\n"


def export_json(study: optuna.Study, config: StudyConfig, t: FrozenTrial) -> dict[str, Any]:
    spec = config.secrets.spec(launch_spec(config, t))
    baseline = baseline_trial(study)
    names = [s.name for s in config.benchmark.scenarios]
    scenarios: dict[str, Any] = {}
    record = record_of(t)
    for c in compare_scenarios(t, baseline, names):
        figures = {m.key: record.figure(c.scenario, m.key) for m in METRICS}
        figures["speedup_vs_baseline"] = round(c.speedup.ratio, 4) if c.speedup is not None else None
        scenarios[c.scenario] = figures
    rec = recommended(study)
    is_rec = rec is not None and rec.trial.number == t.number
    speedup = study_speedup(study, config, t) if baseline is not None and baseline.number != t.number else None
    out: dict[str, Any] = {
        "study": study.study_name,
        "trial": t.number,
        "state": t.state.name,
        "feasible": Outcome.of(t) == Outcome.FEASIBLE and is_counted(t),
        "verdict": Outcome.text(t),
        "baseline": record.is_baseline,
        "baseline_trial": baseline.number if baseline is not None else None,
        "metric_names": study.metric_names,
        "values": t.values,
        "score": figure_text(t, config),
        "speedup_vs_baseline": round(speedup.ratio, 4) if speedup is not None else None,
        "speedup": speedup.as_json() if speedup is not None else None,
        "recommended": is_rec,
        "not_verified": rec.missing() if rec is not None and is_rec else None,
        "params": t.params,
        "gate": record.gate,
        "launch": {"argv": list(spec.argv), "env": dict(spec.env), "shell": spec.shell_text()},
        "supply": config.secrets.names(launch_spec(config, t)),
        "scenarios": scenarios,
    }
    # The latency promise and what this trial showed of it; a rate objective's figures and probes, as numbers.
    if (slo := slo_object(t, config, study)) is not None:
        out["slo"] = slo
    out.update(objective_of(config).facts(t))
    if record.probes:
        out["probes"] = [dict(p) for p in record.probes]
    if config.target.systemd is not None:
        out["systemd"] = {"unit": config.target.systemd.unit, "dropin": export_dropin(study, config, t)}
    return out


def export_text(study: optuna.Study, config: StudyConfig, *, fmt: str, trial: int | None = None) -> str:
    """The chosen trial in ``fmt`` (one of :data:`FORMATS`), ready to print."""
    import json

    t = choose_trial(study, trial)
    if fmt == "dropin":
        return export_dropin(study, config, t)
    if fmt == "command":
        # One line and nothing else, so `eval "$(tune export --format command)"` and shlex.split() work.
        return launch_text(config, t) + "\n"
    if fmt == "json":
        return json.dumps(export_json(study, config, t), indent=2, default=str) + "\n"
    raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
