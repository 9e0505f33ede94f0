"""PNG plots for the report, drawn with matplotlib's Agg backend (no display, no browser).

Optuna's plotly figures would need a headless Chrome to become PNGs; ``optuna.visualization.matplotlib``
and plain matplotlib write them directly.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.report._facts import ScenarioComparison, feasibility_label
from tuner.trials import attrs, gate_pending, study_trials

__all__ = [
    "gated_view",
    "plot_history",
    "plot_importances",
    "plot_param_map",
    "plot_scenarios",
]

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


def gated_view(study: optuna.Study) -> optuna.Study:
    """``study`` as Optuna's own plots must see it: a trial that failed the end-of-study gate is infeasible.

    Optuna reads feasibility from the constraints stored with a trial, and those are frozen when it finishes:
    a finalist gated at the end (``[gate] when = "final"``) has none, so Optuna would draw a config that
    failed its gate as feasible, even as the best value. The view is an in-memory copy of the finished trials
    with those failures carrying a violated ``correctness`` constraint (the study itself is never changed).
    """
    trials = study_trials(study)
    failed = {
        t.number for t in trials if t.user_attrs.get(attrs.GATE_DEFERRED) and t.user_attrs.get(attrs.CORRECT) is False
    }
    if not failed:
        return study
    view = optuna.create_study(study_name=study.study_name, directions=study.directions)
    for t in trials:
        if not t.state.is_finished():
            continue  # a running trial has no value to draw (and Optuna adds only finished ones)
        if t.number in failed:
            t = copy.deepcopy(t)
            t.set_constraint("correctness", 1.0)
        view.add_trial(t)
    return view


def plot_history(study: optuna.Study, path: Path, *, target: Target | None, target_name: str) -> Path:
    """Objective per trial with the best-so-far line; Optuna draws infeasible trials apart (its constraints,
    with the end-of-study gate's verdicts: :func:`gated_view`)."""
    import warnings

    from optuna.visualization.matplotlib import plot_optimization_history

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "experimental" warnings from optuna.visualization.matplotlib
        ax = plot_optimization_history(gated_view(study), target=target, target_name=target_name)
    ax.set_title(f"Optimisation history: {study.study_name}")
    # Optuna puts the legend beside the axes, where it takes half the figure: inside, small, where it hides
    # the fewest points, is enough. Its grey infeasible points have no legend entry: they get one.
    _resize(ax, 8, 4.5)
    handles, labels = ax.get_legend_handles_labels()
    if any(str(c.get_label()).startswith("_") and _is_grey(c) for c in ax.collections):
        from matplotlib.lines import Line2D

        grey = Line2D([], [], marker="o", linestyle="", color="#cccccc", label="infeasible (gate)")
        handles, labels = [*handles, grey], [*labels, "infeasible (gate)"]
    ax.legend(handles, labels, loc="best", fontsize=8, framealpha=0.8)
    return _save(ax.figure, path)


def _is_grey(collection: Any) -> bool:
    """Optuna's infeasible points: unlabelled, #cccccc, and present (it draws the collection even when empty)."""
    colours = collection.get_facecolor()
    drawn = len(collection.get_offsets()) > 0
    return drawn and len(colours) > 0 and all(abs(c[0] - 0.8) < 0.01 and abs(c[1] - 0.8) < 0.01 for c in colours)


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


def plot_param_map(
    trials: Sequence[FrozenTrial],
    path: Path,
    *,
    x: str,
    y: str,
    score: Callable[[FrozenTrial], float],
    score_name: str,
    title: str,
) -> Path:
    """Score over two numeric params: feasible trials coloured by score, infeasible and failed ones marked.

    Failed configs are drawn too: where the server does not start (OOM at a large budget) is half the map.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    # A `when = "final"` study gates its finalists only: the rest are measured and presumed correct.
    good = [
        t for t in trials if gate_pending(t) or (t.state == TrialState.COMPLETE and feasibility_label(t) == "feasible")
    ]
    unchecked = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get(attrs.GATE_SKIPPED)]
    wrong = [t for t in trials if t.state == TrialState.COMPLETE and t not in good and t not in unchecked]
    pruned = [t for t in trials if t.state == TrialState.PRUNED and t.user_attrs.get(attrs.PRUNED_SKIPPED) is not None]
    failed = [t for t in trials if t.state == TrialState.PRUNED and t not in pruned]

    def xy(ts: Sequence[FrozenTrial]) -> tuple[list[float], list[float]]:
        return [float(t.params[x]) for t in ts], [float(t.params[y]) for t in ts]

    if good:
        gx, gy = xy(good)
        values = [score(t) for t in good]
        label = "feasible or not gated (final gate)" if any(gate_pending(t) for t in good) else "feasible"
        points = ax.scatter(gx, gy, c=values, cmap="viridis", s=90, edgecolors="black", label=label)
        fig.colorbar(points, ax=ax, label=score_name)
        best = max(good, key=score)
        ax.annotate(
            f"top here: #{best.number}",
            (float(best.params[x]), float(best.params[y])),
            textcoords="offset points",
            xytext=(8, 8),
            fontsize=9,
        )
    if unchecked:  # measured, too far behind the best to be gated: neither feasible nor wrong
        ux, uy = xy(unchecked)
        ax.scatter(ux, uy, marker="s", facecolors="none", edgecolors="tab:olive", s=70, label="not gated (behind)")
    if wrong:
        wx, wy = xy(wrong)
        ax.scatter(wx, wy, marker="x", c="red", s=80, label="infeasible (gate)")
    if pruned:
        px, py = xy(pruned)
        ax.scatter(px, py, marker="D", facecolors="none", edgecolors="tab:blue", s=60, label="regression-pruned")
    if failed:
        fx, fy = xy(failed)
        ax.scatter(fx, fy, marker="o", facecolors="none", edgecolors="grey", s=80, label="failed")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if good or unchecked or wrong or pruned or failed:
        ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


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
        [c.baseline_tok_s for c in comparisons], [c.baseline_ci for c in comparisons], -width / 2, "baseline", "#9e9e9e"
    )
    best_bars = bars(
        [c.best_tok_s for c in comparisons],
        [c.best_ci for c in comparisons],
        width / 2,
        f"best (#{best_number})",
        "#2e7d32",
    )
    for rect, c in zip(best_bars, comparisons, strict=True):
        if c.speedup is not None and math.isfinite(c.speedup):
            ax.annotate(
                f"{c.speedup:.2f}x",
                (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=9,
            )
    ax.set_xticks(idx)
    ax.set_xticklabels([c.scenario for c in comparisons])
    ax.set_ylabel("output tok/s")
    ax.set_title(f"Best config vs baseline, per scenario (bars: {confidence:.0%} interval)")
    ax.legend(loc="best", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, path)
