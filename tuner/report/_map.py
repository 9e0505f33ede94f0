"""Which two parameters the report's score map draws, and over which trials: the recommended config's branch.

A map of DDTree's budget x top-k says nothing about a DFLASH recommendation (those parameters do not exist
there). So the map takes the recommended trial's branch (the values of the parameters that switch others on or
off, e.g. ``algorithm = DFLASH``), its two most important numeric parameters active there, and the counted
trials of that branch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from optuna.trial import FrozenTrial

from tuner.config import StudyConfig
from tuner.space import Param, Value, format_value
from tuner.trials import is_counted

__all__ = ["MapView", "map_view"]

@dataclass(frozen=True, kw_only=True)
class MapView:
    x: str
    y: str
    branch: dict[str, Value]
    trials: tuple[FrozenTrial, ...]
    recommended: int | None

    @property
    def branch_text(self) -> str:
        if not self.branch:
            return "the study"
        return "the branch " + ", ".join(f"{k} = {format_value(v)}" for k, v in self.branch.items())

    @property
    def title(self) -> str:
        where = ", ".join(f"{k}={format_value(v)}" for k, v in self.branch.items())
        return f"{self.x} × {self.y}" + (f" ({where})" if where else "")


def _numeric(p: Param) -> bool:
    """An axis can be drawn for ints, floats, and categorical numbers (``choices = [16, 64, 128]``)."""
    if p.kind in ("int", "float"):
        return True
    return p.kind == "categorical" and all(isinstance(c, int | float) and not isinstance(c, bool) for c in p.choices)


def map_view(
    config: StudyConfig, trials: Sequence[FrozenTrial], best: FrozenTrial | None, ranking: Mapping[str, float]
) -> MapView | None:
    """The map to draw, or None when the recommended branch has fewer than two numeric parameters."""
    space = config.space
    branch = {p.name: best.params[p.name] for p in space.branch_params() if best is not None and p.name in best.params}
    numeric = [p for p in space.params if _numeric(p) and (best is None or p.name in best.params)]
    names = [p.name for p in numeric]
    if (axes := config.dialect.map_axes_for(numeric)) is not None:
        x, y = axes
    elif len(names) >= 2:
        x, y = sorted(names, key=lambda n: (-ranking.get(n, -1.0), names.index(n)))[:2]
    else:
        return None
    mapped = tuple(
        t
        for t in trials
        if is_counted(t)
        and x in t.params
        and y in t.params
        and all(t.params.get(k) == v for k, v in branch.items())
    )
    return MapView(x=x, y=y, branch=branch, trials=mapped, recommended=best.number if best is not None else None)
