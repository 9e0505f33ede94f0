"""``[slo]`` as the views say it: ``tune best --json``'s ``slo`` object, and the closest config when none met it."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial

from tuner.config import StudyConfig
from tuner.trials import attrs, closest_to_slo, misses_slo, slo_attainment

__all__ = ["closest_slo_lines", "slo_object"]


def _round(x: Any) -> Any:
    return round(x, 4) if isinstance(x, float) else x


def slo_object(t: FrozenTrial, config: StudyConfig) -> dict[str, Any] | None:
    """``met``, the ``[slo]`` limits and, per scenario with an SLO, its limits, required share and the
    attainment ``t`` measured with its interval (None: the study has no SLO)."""
    scenarios = [s for s in config.benchmark.scenarios if s.slo is not None]
    if not scenarios:
        return None
    base = config.slo
    per = {}
    for s in scenarios:
        assert s.slo is not None
        measured = {k: _round(v) for k, v in slo_attainment(t, s.name).items()}
        per[s.name] = {"limits": s.slo.limits(), "required": s.slo.attainment, **measured}
    return {
        "met": not misses_slo(t),
        "limits": base.limits() if base is not None else None,
        "attainment": base.attainment if base is not None else None,
        "scenarios": per,
        "missed": t.user_attrs.get(attrs.SLO_MISSED),
    }


def closest_slo_lines(study: optuna.Study, config: StudyConfig) -> list[str]:
    """When no config met the SLO: the one that came closest, marked as not meeting it, with its attainment per
    scenario ([] when some config met it, or none missed it)."""
    t = closest_to_slo(study)
    if t is None:
        return []
    shares = []
    for s in config.benchmark.scenarios:
        a = slo_attainment(t, s.name)
        if s.slo is not None and a["attainment"] is not None:
            shares.append(f"{s.name} {a['attainment']:.1%} (needs {s.slo.attainment:.0%})")
    return [
        "no config met the SLO: nothing to recommend",
        f"closest (does NOT meet the SLO): trial #{t.number}, attainment " + ", ".join(shares),
        f"  why: {t.user_attrs.get(attrs.SLO_MISSED) or 'misses the SLO'}",
    ]
