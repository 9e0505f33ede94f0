"""What the console prints of a trial's measured scenarios."""

from __future__ import annotations

import optuna

from tuner.config import StudyConfig
from tuner.trials import record_of

__all__ = ["measured_text"]


def measured_text(trial: optuna.Trial, config: StudyConfig) -> str:
    """``; c1-short 140.1 (142.6 ± 2.5, 2 repeats), ...``: every scenario the trial measured, in run order."""
    record = record_of(trial)
    parts = []
    for s in config.benchmark.in_run_order():
        value = record.figure(s.name, "score")
        if not isinstance(value, int | float):
            continue
        point = record.scenarios[s.name].get("point", value)
        hw = record.figure(s.name, "half_width")
        n = len(record.figure(s.name, "repeats") or ())
        spread = f" ± {hw:.1f}" if isinstance(hw, int | float) else ""
        parts.append(f"{s.name} {value:.1f} ({point:.1f}{spread}, {n} repeat{'s' if n != 1 else ''})")
    return "; " + ", ".join(parts) if parts else ""
