from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.config._reader import Table


@dataclass(frozen=True, kw_only=True)
class SearchSection:
    sampler: str = "tpe"
    n_startup_trials: int = 8
    seed_trials: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    """Expert configurations enqueued right after the baseline."""
    import_best_from: str | None = None
    """Another study (same storage) whose best configurations are enqueued too."""
    import_top: int = 3


def parse_search(t: Table | None) -> SearchSection:
    if t is None:
        return SearchSection()
    seeds = t.raw("seed_trials", [])
    if not isinstance(seeds, list) or not all(isinstance(s, dict) for s in seeds):
        raise t.error("seed_trials", "a list of tables of parameter values", seeds)
    section = SearchSection(
        sampler=t.choice("sampler", ("tpe", "random"), "tpe"),
        n_startup_trials=t.int("n_startup_trials", 8, min=0),
        seed_trials=tuple(dict(s) for s in seeds),
        import_best_from=t.str("import_best_from", None),
        import_top=t.int("import_top", 3, min=1),
    )
    t.finish()
    return section
