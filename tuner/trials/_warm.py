"""What a warm start carried over from another study: the record every reader of this study shares.

``tuner.study`` reads the other study once, maps its counted trials onto this study's space and stores the result
as one study attr (:data:`~tuner.trials.attrs.WARM_START`); the sampler reads the trials from there as its prior
(:mod:`tuner.search`), and the report and ``tune status`` say what was carried over and from where. None of it is
a trial of this study: nothing carried over is counted, ranked or recommended here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna

from tuner.trials import _attrs as attrs

__all__ = ["CarriedTrial", "WarmStart", "warm_start_of"]


@dataclass(frozen=True, kw_only=True)
class CarriedTrial:
    """One counted trial of the other study, its params mapped onto this study's space."""

    number: int
    """Its number in the other study."""
    params: dict[str, Any]
    values: tuple[float, ...] | None
    """Its objective values; None when it failed there (did not start, died, pruned as slower, wrong answers)."""
    baseline: bool = False
    """The other study's baseline trial."""

    def to_attr(self) -> dict[str, Any]:
        values = list(self.values) if self.values else None
        return {"number": self.number, "params": self.params, "values": values} | (
            {"baseline": True} if self.baseline else {}
        )

    @classmethod
    def from_attr(cls, raw: Mapping[str, Any]) -> CarriedTrial:
        return cls(
            number=int(raw["number"]),
            params=dict(raw["params"]),
            values=tuple(float(v) for v in raw["values"]) if raw.get("values") else None,
            baseline=bool(raw.get("baseline", False)),
        )


@dataclass(frozen=True, kw_only=True)
class WarmStart:
    study: str
    storage: str
    """Where the other study is, as shown to people (a password in the URL is masked)."""
    trials: tuple[CarriedTrial, ...] = ()
    """Its counted trials that map onto this space: the sampler's prior."""
    top: tuple[CarriedTrial, ...] = ()
    """Its best configs (its recommendation first), run here right after the baseline."""
    skipped: tuple[str, ...] = ()
    """Why each of its configs was left out (``#7 budget=40: outside 2..32``)."""
    dropped: tuple[str, ...] = ()
    """Its parameters this space no longer has."""
    added: dict[str, Any] = field(default_factory=dict)
    """This space's parameters it did not have, and the value (this study's baseline's) they were given."""
    note: str | None = None
    """Why its results do not inform the sampler, when they do not (objectives that differ)."""
    prior: bool = False
    """Whether its results inform the sampler (``[search] warm_start_prior``)."""

    def to_attr(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "storage": self.storage,
            "trials": [t.to_attr() for t in self.trials],
            "top": [t.to_attr() for t in self.top],
            "skipped": list(self.skipped),
            "dropped": list(self.dropped),
            "added": self.added,
            "note": self.note,
            "prior": self.prior,
        }

    @classmethod
    def from_attr(cls, raw: Mapping[str, Any]) -> WarmStart:
        return cls(
            study=str(raw["study"]),
            storage=str(raw.get("storage", "")),
            trials=tuple(CarriedTrial.from_attr(t) for t in raw.get("trials", ())),
            top=tuple(CarriedTrial.from_attr(t) for t in raw.get("top", ())),
            skipped=tuple(str(s) for s in raw.get("skipped", ())),
            dropped=tuple(str(s) for s in raw.get("dropped", ())),
            added=dict(raw.get("added", {})),
            note=raw.get("note"),
            prior=bool(raw.get("prior", False)),
        )

    def lines(self) -> list[str]:
        """What the console, ``tune status`` and the report say: :meth:`text`, and the configs left out."""
        if not self.skipped:
            return [self.text()]
        shown = "; ".join(self.skipped[:3]) + (f"; and {len(self.skipped) - 3} more" if len(self.skipped) > 3 else "")
        return [self.text(), f"left out of the warm start, outside this space: {shown}"]

    def text(self) -> str:
        """One line: what was carried over, from where, and what was not."""
        measured = sum(1 for t in self.trials if t.values is not None)
        parts = [f"warm start from study {self.study} ({self.storage})"]
        if self.note:
            parts[0] += f": {self.note}"
        elif self.prior:
            parts[0] += (
                f": {len(self.trials)} of its trials carried over as the sampler's prior ({measured} measured, "
                f"{len(self.trials) - measured} failed or pruned there), not counted here"
            )
        if self.top:
            parts.append(
                f"its top {len(self.top)} configs run first (its #{', #'.join(str(t.number) for t in self.top)})"
            )
        if self.skipped:
            parts.append(f"{len(self.skipped)} of its configs left out, outside this space")
        if self.dropped:
            parts.append(f"its {', '.join(self.dropped)} dropped (not in this space)")
        if self.added:
            parts.append("new here, at this baseline's value: " + ", ".join(f"{k}={v}" for k, v in self.added.items()))
        return "; ".join(parts)


def warm_start_of(study: optuna.Study) -> WarmStart | None:
    """What the study's warm start carried over, or None for a study started cold."""
    raw = study.user_attrs.get(attrs.WARM_START)
    return WarmStart.from_attr(raw) if isinstance(raw, Mapping) else None
