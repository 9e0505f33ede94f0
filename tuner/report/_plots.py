"""PNG plots for the report, drawn with matplotlib's Agg backend (no display, no browser).

Optuna's plotly figures would need a headless Chrome to become PNGs; ``optuna.visualization.matplotlib``
and plain matplotlib write them directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig
from tuner.metrics import LATENCY_MEASURES
from tuner.objective import objective_of
from tuner.report._facts import ScenarioComparison, figure_text
from tuner.report._map import MapView
from tuner.report._slo import RatePoint
from tuner.trials import Outcome, Recommendation, current_confirmation, feasible, is_counted, rank_value, study_trials

__all__ = ["plot_history", "plot_importances", "plot_latency_vs_rate", "plot_param_map", "plot_scenarios"]

Target = Callable[[FrozenTrial], float]


def _pyplot() -> Any:
    import matplotlib

    # Agg before pyplot is first used: a report runs on a headless box or over SSH with no display.
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _resize(ax: Any, width: float, height: float) -> None:
    ax.figure.set_size_inches(width, height)


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def _history_points(study: optuna.Study) -> dict[str, list[tuple[int, float]]]:
    """Every counted trial by what became of it, at the value it is drawn at (failed ones: no value, NaN)."""
    groups: dict[str, list[tuple[int, float]]] = {}
    for t in study_trials(study):
        if not is_counted(t):
            continue
        became = Outcome.of(t)
        if t.state == TrialState.COMPLETE:
            value = rank_value(t)
        elif became == Outcome.SLOWER and t.intermediate_values:
            value = t.intermediate_values[max(t.intermediate_values)]  # the partial objective, on its scale
        else:
            value = math.nan
        groups.setdefault(became, []).append((t.number, value))
    return groups


def _best_line(study: optuna.Study, rec: Recommendation | None) -> tuple[list[int], list[float]]:
    """The best score so far among the configs the study could recommend: finalists the confirmation ranked
    below its winner never lift it, so it ends at the recommended trial."""
    overturned: set[int] = set()
    confirmation = current_confirmation(study)
    if confirmation is not None and rec is not None and rec.confirmed:
        overturned = {n for n in confirmation["trials"] if n != rec.trial.number}
    xs, ys, best = [], [], -math.inf
    for t in sorted(feasible(study), key=lambda t: t.number):
        if t.number in overturned or rank_value(t, study.directions) <= best:
            continue
        best = rank_value(t, study.directions)
        xs.append(t.number)
        ys.append(rank_value(t))
    return xs, ys


_STYLE: dict[str, dict[str, Any]] = {
    Outcome.FEASIBLE: {"marker": "o", "color": "tab:blue", "label": "feasible"},
    Outcome.NOT_GATED_YET: {"marker": "o", "color": "tab:cyan", "label": "not gated yet (only finalists are)"},
    Outcome.NOT_GATED: {"marker": "s", "facecolors": "none", "edgecolors": "tab:olive", "label": "not gated (behind)"},
    Outcome.NOT_FINALIST: {"marker": "s", "facecolors": "none", "edgecolors": "tab:cyan", "label": "not a finalist"},
    Outcome.WRONG: {"marker": "x", "color": "red", "label": "infeasible (wrong answers)"},
    Outcome.MISSES_SLO: {"marker": "x", "color": "tab:orange", "label": "infeasible (misses the SLO)"},
    Outcome.SLOWER: {
        "marker": "D",
        "facecolors": "none",
        "edgecolors": "tab:blue",
        "label": "pruned: slower (where it was heading)",
    },
}


def plot_history(
    study: optuna.Study, config: StudyConfig, path: Path, *, recommended: Recommendation | None
) -> Path:
    """Every counted trial's score by trial number, the best-so-far line, and the recommendation marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    groups = _history_points(study)
    drawn = [v for pts in groups.values() for _, v in pts if math.isfinite(v)]
    floor = min(drawn) * 0.95 if drawn else 0.0
    for kind, pts in groups.items():
        style = _STYLE.get(kind)
        xs = [n for n, _ in pts]
        if style is None:  # failed: no value to draw, so on the floor
            ax.scatter(xs, [floor] * len(xs), marker="v", color="grey", s=30, label=f"failed ({kind})")
            continue
        ax.scatter(xs, [v for _, v in pts], s=36, **style)
    line_x, line_y = _best_line(study, recommended)
    if line_x:
        last = max(n for pts in groups.values() for n, _ in pts)
        ax.step([*line_x, last], [*line_y, line_y[-1]], where="post", color="tab:red", label="best so far")
    if recommended is not None and len(recommended.trial.values or ()) >= 1:
        t = recommended.trial
        ax.scatter([t.number], [rank_value(t)], marker="*", s=220, color="gold", edgecolors="black", zorder=5,
                   label=f"recommended #{t.number}")
        text = f"#{t.number} {figure_text(t, config)}"
        if recommended.confirmed_value is not None:
            text += f"\nconfirmed {objective_of(config).format(recommended.confirmed_value)}"
        ax.annotate(text, (t.number, rank_value(t)), textcoords="offset points", xytext=(8, -24), fontsize=8)
    ax.set_xlabel("trial")
    ax.set_ylabel((study.metric_names or ["score"])[0] if len(study.directions) == 1 else "geometric mean")
    ax.set_title(f"Optimisation history: {study.study_name}")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=7, framealpha=0.8)
    return _save(fig, path)


def plot_importances(
    study: optuna.Study, path: Path, *, evaluator: Any, target: Target | None, target_name: str
) -> Path:
    import warnings

    from optuna.visualization.matplotlib import plot_param_importances

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ax = plot_param_importances(study, evaluator=evaluator, target=target, target_name=target_name)
    # Optuna titles the axes on the left ("Hyperparameter Importances"); a centred title would print over it.
    ax.set_title("", loc="left")
    ax.set_title("Parameter importance (PED-ANOVA, feasible trials)")
    _resize(ax, 8, 4.5)
    return _save(ax.figure, path)


def plot_param_map(view: MapView, path: Path, *, score_name: str) -> Path:
    """Score over two numeric params in the recommended branch: feasible trials coloured by score, the
    recommendation starred, infeasible, pruned and failed ones marked.

    Failed configs are drawn too: where the server does not start (OOM at a large budget) is half the map.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    x, y = view.x, view.y
    kinds: dict[str, list[Any]] = {}
    for t in view.trials:
        kinds.setdefault(Outcome.of(t), []).append(t)

    def xy(ts: Sequence[Any]) -> tuple[list[float], list[float]]:
        return [float(t.params[x]) for t in ts], [float(t.params[y]) for t in ts]

    good = kinds.get(Outcome.FEASIBLE, []) + kinds.get(Outcome.NOT_GATED_YET, [])
    if good:
        points = ax.scatter(*xy(good), c=[rank_value(t) for t in good], cmap="viridis", s=90, edgecolors="black",
                            label="feasible" + (" or not gated yet" if kinds.get(Outcome.NOT_GATED_YET) else ""))
        fig.colorbar(points, ax=ax, label=score_name)
    for became, style in _MAP_STYLE.items():
        if kinds.get(became):
            ax.scatter(*xy(kinds[became]), **style)
    shown = (Outcome.FEASIBLE, Outcome.NOT_GATED_YET, *_MAP_STYLE)
    failed = [t for k, ts in kinds.items() if k not in shown for t in ts]
    if failed:
        ax.scatter(*xy(failed), marker="o", facecolors="none", edgecolors="grey", s=80, label="failed")
    star = [t for t in view.trials if t.number == view.recommended]
    if star:
        ax.scatter(*xy(star), marker="*", s=260, color="gold", edgecolors="black", zorder=5,
                   label=f"recommended #{star[0].number}")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"Score map: {view.title}", fontsize=11)
    ax.grid(True, alpha=0.3)
    if view.trials:
        ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


_HOLLOW = {"facecolors": "none", "s": 70}
_MAP_STYLE: dict[str, dict[str, Any]] = {
    Outcome.NOT_GATED: {"marker": "s", **_HOLLOW, "edgecolors": "tab:olive", "label": "not gated (behind)"},
    Outcome.NOT_FINALIST: {"marker": "s", **_HOLLOW, "edgecolors": "tab:cyan", "label": "not a finalist"},
    Outcome.WRONG: {"marker": "x", "c": "red", "s": 80, "label": "infeasible (wrong answers)"},
    Outcome.MISSES_SLO: {"marker": "x", "c": "tab:orange", "s": 80, "label": "infeasible (misses the SLO)"},
    Outcome.SLOWER: {"marker": "D", **_HOLLOW, "s": 60, "edgecolors": "tab:blue", "label": "pruned (slower)"},
}


def plot_scenarios(
    comparisons: Sequence[ScenarioComparison], path: Path, *, best_number: int, confidence: float = 0.8
) -> Path:
    """Per-scenario tok/s of the baseline and the best config, with their confidence intervals."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(comparisons) + 2), 4.5))
    idx = np.arange(len(comparisons))
    width = 0.38

    def bars(
        values: list[float | None], cis: list[tuple[float, float] | None], offset: float, label: str, color: str
    ) -> Any:
        heights = [v if v is not None else 0.0 for v in values]
        err = [
            [max(h - c[0], 0.0) if c else 0.0 for h, c in zip(heights, cis, strict=True)],
            [max(c[1] - h, 0.0) if c else 0.0 for h, c in zip(heights, cis, strict=True)],
        ]
        return ax.bar(idx + offset, heights, width, yerr=err, capsize=4, label=label, color=color)

    bars(
        [c.baseline_tok_s for c in comparisons],
        [_interval(c.baseline_tok_s, c.baseline_half_width) for c in comparisons],
        -width / 2,
        "baseline",
        "#9e9e9e",
    )
    best_bars = bars(
        [c.best_tok_s for c in comparisons],
        [_interval(c.best_tok_s, c.best_half_width) for c in comparisons],
        width / 2,
        f"recommended (#{best_number})",
        "#2e7d32",
    )
    for rect, c in zip(best_bars, comparisons, strict=True):
        if c.speedup is not None and math.isfinite(c.speedup.ratio):
            ax.annotate(
                f"{c.speedup.ratio:.2f}x",
                (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=9,
            )
    ax.set_xticks(idx)
    ax.set_xticklabels([c.scenario for c in comparisons])
    ax.set_ylabel("output tok/s")
    ax.set_title(f"Recommended config vs baseline, per scenario (bars: {confidence:.0%} interval)")
    ax.legend(loc="best", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, path)


def _interval(point: float | None, half_width: float | None) -> tuple[float, float] | None:
    return None if point is None or half_width is None else (point - half_width, point + half_width)


def plot_latency_vs_rate(series: dict[str, list[RatePoint]], path: Path) -> Path:
    """Each latency measure's p99 (TTFT, TPOT, E2E) against the offered rate, one line per config (``series``:
    label -> its points), each p99 with its interval as a bar (none above it: too few requests for an upper
    bound), the SLO's limit as a dashed line and a cross where a config missed it."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(LATENCY_MEASURES), figsize=(5 * len(LATENCY_MEASURES), 4.2))
    colors = ["#9e9e9e", "#2e7d32", "#1565c0", "#ef6c00"]
    for ax, measure in zip(axes, LATENCY_MEASURES, strict=True):
        scale, key = measure.scale, measure.limit
        limits: set[float] = set()
        for (name, points), color in zip(series.items(), colors, strict=False):
            shown = [(p.rate, f) for p in points if (f := p.p99.get(measure.key)) is not None]
            if shown:
                ys = [f.point * scale for _, f in shown]
                below = [(f.point - f.low) * scale if f.low is not None else 0.0 for _, f in shown]
                above = [(f.high - f.point) * scale if f.high is not None else 0.0 for _, f in shown]
                ax.errorbar([x for x, _ in shown], ys, yerr=[below, above], marker="o", color=color, capsize=3,
                            label=name)  # fmt: skip
            missed = [
                (p.rate, f.point * scale)
                for p in points
                if p.verdict is not None and not p.verdict.holds and (f := p.p99.get(measure.key))
            ]
            if missed:
                ax.scatter(*zip(*missed, strict=True), marker="x", s=90, color="tab:red", zorder=3)
            met = [(p.rate, f.point * scale) for p in points if p.verdict is not None and p.verdict.met
                   and (f := p.p99.get(measure.key))]  # fmt: skip
            if met:
                ax.scatter(*zip(*met, strict=True), marker="$\\checkmark$", s=90, color="tab:green", zorder=3)
            limits |= {v * scale for p in points if (v := p.slo.limits().get(key)) is not None}
        for limit in sorted(limits):
            ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1, label=f"SLO {limit:g} {measure.unit}")
        rates = [p.rate for points in series.values() for p in points if p.rate > 0]
        if rates and max(rates) > 8 * min(rates):  # a rate search's probes span octaves: a log axis shows each
            ax.set_xscale("log", base=2)
        ax.set_xlabel("offered rate (requests/s)")
        ax.set_ylabel(f"{measure.label} p99 ({measure.unit})")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    fig.suptitle("Latency against offered rate (✓ = shown to meet the SLO there, × = misses it)")
    return _save(fig, path)
