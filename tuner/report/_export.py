"""The chosen config in a form to act on: a systemd drop-in, a shell command line, or JSON."""

from __future__ import annotations

import posixpath
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.config import StudyConfig
from tuner.errors import TuneError
from tuner.metrics import METRICS, scenario_key
from tuner.report._facts import baseline_trial, best_feasible, feasibility_label, rank_value, scenario_figure
from tuner.space import render
from tuner.spec import LaunchSpec
from tuner.target import base_spec
from tuner.trials import attrs, is_counted, is_feasible, study_trials

__all__ = ["FORMATS", "choose_trial", "export_dropin", "export_json", "export_text", "launch_spec"]

FORMATS = ("dropin", "command", "json")


def choose_trial(study: optuna.Study, number: int | None = None) -> FrozenTrial:
    """The best feasible trial (the top of the Pareto front by geometric mean), or trial ``number``.

    An explicitly named trial is returned even when infeasible (the caller labels it); the best never is.
    """
    if number is None:
        from tuner.trials import recommended_trial

        best = best_feasible(study)
        if not best:
            raise TuneError(f"study {study.study_name!r} has no feasible completed trial yet: nothing to export")
        if len(best) == 1:
            return recommended_trial(study) or best[0]  # the confirmed winner when the top was re-measured
        return max(best, key=lambda t: (rank_value(t), -t.number))
    trials = study_trials(study)
    if not 0 <= number < len(trials):
        raise TuneError(f"study {study.study_name!r} has no trial #{number} (it holds {len(trials)})")
    t = trials[number]
    if not t.params:
        raise TuneError(f"trial #{number} has no parameters ({t.state.name}): nothing to export")
    return t


def launch_spec(config: StudyConfig, t: FrozenTrial) -> LaunchSpec:
    """What the trial ran: the base command itself for the baseline, else the base with the params applied."""
    base = base_spec(config.target)
    return base if t.user_attrs.get(attrs.BASELINE) else render(config.space, base, t.params)


def _header(study: optuna.Study, t: FrozenTrial) -> list[str]:
    values = "/".join(f"{v:.1f}" for v in t.values) if t.values else "-"
    names = ", ".join(study.metric_names or []) or "score"
    lines = [f"# tune: trial #{t.number} of study {study.study_name} ({names}: {values})"]
    label = feasibility_label(t)
    if label != "feasible":
        lines.append(f"# WARNING: this trial is {label}; it is not the recommended config")
    return lines


def export_dropin(study: optuna.Study, config: StudyConfig, t: FrozenTrial) -> str:
    """A systemd drop-in (``[Service]``, ``ExecStart=`` reset, the command, ``Environment=`` lines)."""
    from tuner.services._systemd import dropin_text

    spec = launch_spec(config, t)
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
    return "\n".join([*_header(study, t), *hints, *body]) + "\n"


def export_json(study: optuna.Study, config: StudyConfig, t: FrozenTrial) -> dict[str, Any]:
    spec = launch_spec(config, t)
    baseline = baseline_trial(study)
    scenarios: dict[str, Any] = {}
    for s in config.benchmark.scenarios:
        figures = {m.key: t.user_attrs.get(scenario_key(s.name, m.key)) for m in METRICS}
        tok = scenario_figure(t, s.name, "tok_s")
        base_tok = scenario_figure(baseline, s.name, "tok_s") if baseline is not None else None
        figures["speedup_vs_baseline"] = round(tok / base_tok, 4) if tok and base_tok else None
        scenarios[s.name] = figures
    out: dict[str, Any] = {
        "study": study.study_name,
        "trial": t.number,
        "state": t.state.name,
        "feasible": is_feasible(t) and is_counted(t),
        "verdict": feasibility_label(t),
        "baseline": bool(t.user_attrs.get(attrs.BASELINE)),
        "baseline_trial": baseline.number if baseline is not None else None,
        "metric_names": study.metric_names,
        "values": t.values,
        "params": t.params,
        "gate": t.user_attrs.get(attrs.GATE),
        "launch": {"argv": list(spec.argv), "env": dict(spec.env), "shell": spec.shell_text()},
        "scenarios": scenarios,
    }
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
        return launch_spec(config, t).shell_text() + "\n"
    if fmt == "json":
        return json.dumps(export_json(study, config, t), indent=2, default=str) + "\n"
    raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
