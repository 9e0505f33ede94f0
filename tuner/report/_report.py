"""The morning-after report: a Markdown file and its PNG plots, built from the study alone."""

from __future__ import annotations

import datetime as dt
import math
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig
from tuner.report._export import choose_trial, export_dropin, launch_spec
from tuner.report._facts import (
    OUTCOMES,
    baseline_trial,
    best_feasible,
    compare_scenarios,
    failure_groups,
    feasibility_label,
    outcome,
    params_text,
    rank_value,
    scenario_figure,
)
from tuner.space import format_value
from tuner.study import _attrs as attrs
from tuner.study import confirmation_text, counted_trials, is_counted, is_feasible

__all__ = ["MIN_IMPORTANCE_TRIALS", "Report", "build_report", "importances"]

MIN_IMPORTANCE_TRIALS = 6
"""Below this many feasible trials an importance ranking is noise dressed as a chart: it is skipped."""

_BUDGET_FLAG = "--speculative-ddtree-budget"
_TOPK_ENV = "SGLANG_DDTREE_MAX_TOPK"


@dataclass(frozen=True, kw_only=True)
class Report:
    path: Path
    plots: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Plots or sections that could not be drawn, with the reason (also written into the report)."""
    best_number: int | None = None


def _feasible_study(study: optuna.Study) -> optuna.Study:
    """An in-memory copy holding only counted, feasible, COMPLETE trials (for importances).

    Infeasible configs are fast because they are wrong, and repeats of a measured config would weigh it twice.
    """
    copy = optuna.create_study(directions=study.directions)
    copy.add_trials([t for t in study.get_trials(deepcopy=False) if is_counted(t) and is_feasible(t)])
    return copy


def _target(study: optuna.Study) -> tuple[Callable[[FrozenTrial], float] | None, str]:
    if len(study.directions) == 1:
        return None, (study.metric_names or ["score"])[0]
    return rank_value, "geometric mean of the objectives"


def importances(study: optuna.Study) -> tuple[dict[str, float], Any, str | None]:
    """PED-ANOVA importances over feasible trials: (importances, evaluator, reason when skipped)."""
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

    feasible = _feasible_study(study)
    n = len(feasible.trials)
    if n < MIN_IMPORTANCE_TRIALS:
        return {}, None, f"needs at least {MIN_IMPORTANCE_TRIALS} feasible trials (this study has {n})"
    # PED-ANOVA compares the top `target_quantile` of trials with the rest; with few trials the default 10%
    # is one trial, so the "good" set is widened to hold at least three.
    evaluator = PedAnovaImportanceEvaluator(target_quantile=min(0.5, max(0.1, 3 / n)))
    target, _ = _target(study)
    try:
        with warnings.catch_warnings():
            # "Some regimes ... have less than 2 trials": expected for conditional params; the report says
            # how many trials the ranking rests on.
            warnings.simplefilter("ignore", UserWarning)
            values = get_param_importances(feasible, evaluator=evaluator, target=target)
    except (ValueError, RuntimeError) as exc:
        return {}, None, f"PED-ANOVA could not rank the parameters: {exc}"
    if not values:
        return {}, None, "no parameter varied among the feasible trials"
    return values, evaluator, None


def _numeric(config: StudyConfig) -> list[str]:
    return [p.name for p in config.space.params if p.kind in ("int", "float")]


def _map_axes(config: StudyConfig, ranking: dict[str, float]) -> tuple[str, str, str] | None:
    """(x, y, title): DDTree's budget x top-k when the space has them; else the two most important numeric
    params (by PED-ANOVA, or in space order when there is no ranking)."""
    by_flag = {p.flag: p.name for p in config.space.params if p.flag}
    by_env = {p.env: p.name for p in config.space.params if p.env}
    budget = by_flag.get(_BUDGET_FLAG) or ("budget" if "budget" in _numeric(config) else None)
    topk = by_env.get(_TOPK_ENV) or ("topk" if "topk" in _numeric(config) else None)
    if budget and topk:
        return budget, topk, "DDTree budget × top-k"
    numeric = _numeric(config)
    ordered = sorted(numeric, key=lambda n: (-ranking.get(n, -1.0), numeric.index(n)))
    return (ordered[0], ordered[1], f"{ordered[0]} × {ordered[1]}") if len(ordered) >= 2 else None


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _ci(ci: tuple[float, float] | None, digits: int = 1) -> str:
    return f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else ""


def _score(t: FrozenTrial) -> str:
    return "/".join(f"{v:.1f}" for v in t.values) if t.values else "-"


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def build_report(study: optuna.Study, config: StudyConfig, out_dir: Path) -> Report:
    """Write ``out_dir/report.md`` and its PNGs; every failure to draw a plot is said in the report itself."""
    out_dir.mkdir(parents=True, exist_ok=True)
    scenarios = [s.name for s in config.benchmark.scenarios]
    trials = study.get_trials(deepcopy=False)
    best_list = best_feasible(study)
    best = choose_trial(study) if best_list else None
    baseline = baseline_trial(study)
    plots: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    md: list[str] = []
    target, target_name = _target(study)

    def draw(name: str, fn: Callable[[], Path]) -> None:
        try:
            plots[name] = fn()
        except Exception as exc:  # one broken plot must not cost the whole morning report
            skipped[name] = f"{type(exc).__name__}: {exc}"

    # -- header --------------------------------------------------------------------------------------------
    states = Counter(t.state.name for t in trials)
    rejected = sum(1 for t in trials if t.user_attrs.get(attrs.REJECTED))
    repeats = sum(1 for t in trials if t.user_attrs.get(attrs.DUPLICATE_OF) is not None)
    outcomes = Counter(outcome(t) for t in trials if is_counted(t))
    outcome_text = ", ".join(f"{outcomes[o]} {o}" for o in OUTCOMES if outcomes[o] or o in OUTCOMES[:3])
    starts = [t.datetime_start for t in trials if t.datetime_start]
    ends = [t.datetime_complete for t in trials if t.datetime_complete]
    span = f"{min(starts):%Y-%m-%d %H:%M} → {max(ends):%Y-%m-%d %H:%M}" if starts and ends else "-"
    md += [
        f"# Tuning report: study `{study.study_name}`",
        "",
        f"Generated {dt.datetime.now():%Y-%m-%d %H:%M} from {config.source}. Trials ran {span}.",
        "",
        f"- **{counted_trials(study)}/{config.study.trials}** counted trials: {outcome_text}.",
        f"- Not counted: {rejected} samples rejected by constraints, {repeats} repeats of measured configs, "
        f"{states.get('FAIL', 0)} interrupted, {states.get('RUNNING', 0)} running.",
        f"- Objective: {', '.join(study.metric_names or ['score'])} (higher is better).",
        "",
    ]

    # -- recommendation -----------------------------------------------------------------------------------
    md += ["## Recommendation", ""]
    if best is None:
        md += ["**No feasible trial yet: nothing to recommend.** See *Failures* below for why configs failed.", ""]
    else:
        spec = launch_spec(config, best)
        base_score = baseline.values[0] if baseline is not None and baseline.values and len(best.values) == 1 else None
        gain = f" ({best.values[0] / base_score:.2f}x the baseline's {base_score:.1f})" if base_score else ""
        md += [
            f"**Best feasible config: trial #{best.number}**, score {_score(best)}{gain}, "
            f"gate {best.user_attrs.get(attrs.GATE, 'n/a')}.",
            "",
        ]
        confirmed = confirmation_text(study)
        md += [
            (confirmed[0].upper() + confirmed[1:] + ".")
            if confirmed
            else "Not confirmed: the top configs were not re-measured (`tune best --confirm` does it).",
            "",
        ]
        if len(best_list) > 1:
            others = ", ".join(f"#{t.number} ({_score(t)})" for t in best_list if t.number != best.number)
            md += [
                f"Pareto front (feasible): #{best.number} is its member with the highest geometric mean; "
                f"the others are {others}.",
                "",
            ]
        md += ["| param | best | baseline |", "|---|---|---|"]
        for p in config.space.params:
            b = best.params.get(p.name)
            base_v = baseline.params.get(p.name) if baseline is not None else config.baseline.get(p.name)
            mark = "" if b == base_v else " ←"
            md.append(
                f"| {p.name} | {format_value(b) if b is not None else '(inactive)'}{mark} "
                f"| {format_value(base_v) if base_v is not None else '(inactive)'} |"
            )
        md += ["", "Launch command:", "", "```sh", spec.shell_text(), "```", ""]
        try:
            dropin = export_dropin(study, config, best)
            md += ["systemd drop-in (`tune export --format dropin`):", "", "```ini", dropin.rstrip(), "```", ""]
        except Exception as exc:
            md += [f"(No systemd drop-in: {exc})", ""]

    # -- per-scenario speed-up -------------------------------------------------------------------------------
    md += ["## Speed-up over the baseline", ""]
    if best is None:
        md += ["No feasible trial to compare.", ""]
    elif baseline is None or baseline.state != TrialState.COMPLETE:
        missing = "was not measured" if baseline is None else f"did not complete ({feasibility_label(baseline)})"
        md += [f"The baseline {missing}: no speed-up can be computed.", ""]
    else:
        if baseline.number == best.number:
            md += ["The baseline itself is the best feasible config: no tried change beat it.", ""]
        comps = compare_scenarios(best, baseline, scenarios)
        md += [
            f"Baseline = trial #{baseline.number} ({feasibility_label(baseline)}), best = trial #{best.number}. "
            "tok/s is the scenario's median over repeats with the benchmark's 95% CI; the speed-up's interval "
            "is a bootstrap of the ratio of medians over the two trials' repeats (crude with 2-3 repeats).",
            "",
            "| scenario | baseline tok/s | best tok/s | speed-up | accept length (base → best) |",
            "|---|---|---|---|---|",
        ]
        noisy = []
        for c in comps:
            speed = "-" if c.speedup is None else f"**{c.speedup:.2f}x**{_ci(c.speedup_ci, 2)}"
            if c.speedup_ci and c.speedup_ci[0] <= 1.0 <= c.speedup_ci[1]:
                noisy.append(c.scenario)
            md.append(
                f"| {c.scenario} | {_fmt(c.baseline_tok_s)}{_ci(c.baseline_ci)} | {_fmt(c.best_tok_s)}{_ci(c.best_ci)} "
                f"| {speed} | {_fmt(c.baseline_accept_length, 2)} → {_fmt(c.accept_length, 2)} |"
            )
        md.append("")
        if noisy:
            md += [f"Within the noise (interval contains 1.0x): {', '.join(noisy)}.", ""]
        draw("scenarios", lambda: _plot_scenarios(comps, out_dir, best.number))
        md += _image(plots, skipped, "scenarios", "Per-scenario tok/s, baseline vs best")

    # -- top 10 ------------------------------------------------------------------------------------------
    ranked = sorted((t for t in trials if is_counted(t) and is_feasible(t)), key=lambda t: (-rank_value(t), t.number))
    md += ["## Top 10 feasible configs", ""]
    if not ranked:
        md += ["None.", ""]
    else:
        head = "| rank | trial | score | " + " | ".join(f"{s} tok/s" for s in scenarios) + " | accept | gate | params |"
        md += [head, "|" + "---|" * (6 + len(scenarios))]
        for i, t in enumerate(ranked[:10], 1):
            toks = " | ".join(_fmt(scenario_figure(t, s, "tok_s")) for s in scenarios)
            accepts = [a for s in scenarios if (a := scenario_figure(t, s, "accept_length")) is not None]
            accept = _fmt(sum(accepts) / len(accepts), 2) if accepts else "-"
            tag = " (baseline)" if t.user_attrs.get(attrs.BASELINE) else ""
            md.append(
                f"| {i} | #{t.number}{tag} | {_score(t)} | {toks} | {accept} | {t.user_attrs.get(attrs.GATE, '-')} "
                f"| {_md_cell(params_text(t.params))} |"
            )
        md.append("")
    top = ranked[0] if ranked else None
    wrong_fast = [
        t
        for t in trials
        if is_counted(t)
        and t.state == TrialState.COMPLETE
        and not is_feasible(t)
        and (top is None or rank_value(t) > rank_value(top))
    ]
    if wrong_fast:
        md += [
            "Faster than the best but **infeasible** (wrong answers; never recommended): "
            + ", ".join(f"#{t.number} ({_score(t)}, {feasibility_label(t)})" for t in wrong_fast)
            + ".",
            "",
        ]

    # -- failures ------------------------------------------------------------------------------------------
    groups = failure_groups(study)
    md += ["## Failures by reason", ""]
    if not groups:
        md += ["No counted trial failed or was infeasible.", ""]
    else:
        phases: Counter[str] = Counter()
        for g in groups:
            phases[g.phase] += len(g.trials)
        md += [
            "By outcome: " + ", ".join(f"{p} {n}" for p, n in phases.most_common()) + ".",
            "",
            "| outcome | reason | count | trials |",
            "|---|---|---|---|",
        ]
        for g in groups:
            shown = ", ".join(f"#{n}" for n in g.trials[:12]) + (" …" if len(g.trials) > 12 else "")
            md.append(f"| {g.phase} | {_md_cell(g.example[:200])} | {len(g.trials)} | {shown} |")
        md.append("")
    saved = sum(float(t.user_attrs.get(attrs.PRUNING_SAVED_S) or 0) for t in trials)
    if saved:
        md += [f"Early stopping of confidently slower configs saved about {saved / 60:.1f} min of benchmarking.", ""]

    # -- importances and plots -------------------------------------------------------------------------------
    md += ["## Parameter importance", ""]
    ranking, evaluator, why = importances(study)
    if why is not None:
        md += [f"Skipped: {why}.", ""]
        skipped["importances"] = why
    else:
        md += [
            "PED-ANOVA over feasible trials (how much each parameter separates the best configs from the rest; "
            "indicative with few trials):",
            "",
            "| param | importance |",
            "|---|---|",
        ]
        md += [f"| {k} | {v:.3f} |" for k, v in ranking.items()]
        md.append("")
        feasible_copy = _feasible_study(study)
        draw("importances", lambda: _plot_importances(feasible_copy, out_dir, evaluator, target, target_name))
        md += _image(plots, skipped, "importances", "Parameter importances")

    md += ["## Optimisation history", ""]
    if any(t.state == TrialState.COMPLETE for t in trials):
        draw("history", lambda: _plot_history(study, out_dir, target, target_name))
        md += _image(plots, skipped, "history", "Optimisation history")
    else:
        md += ["No completed trial yet.", ""]
        skipped["history"] = "no completed trial"

    axes = _map_axes(config, ranking)
    md += [f"## Score map: {axes[2] if axes else 'two numeric parameters'}", ""]
    mapped = [t for t in trials if axes and is_counted(t) and axes[0] in t.params and axes[1] in t.params]
    if axes is None:
        md += ["Needs two numeric parameters in the search space.", ""]
        skipped["map"] = "fewer than two numeric parameters"
    elif not mapped:
        md += [f"No counted trial set both `{axes[0]}` and `{axes[1]}`.", ""]
        skipped["map"] = f"no trial with both {axes[0]} and {axes[1]}"
    else:
        x, y, title = axes
        draw("map", lambda: _plot_map(mapped, out_dir, x, y, target_name, title))
        md += [
            f"`{x}` × `{y}` over {len(mapped)} counted trials: colour = score of feasible trials, "
            "red × = infeasible, blue ◇ = regression-pruned (slower than the best), grey ○ = failed.",
            "",
        ]
        md += _image(plots, skipped, "map", f"{x} x {y}")

    path = out_dir / "report.md"
    path.write_text("\n".join(md).rstrip() + "\n")
    return Report(path=path, plots=plots, skipped=skipped, best_number=best.number if best else None)


def _image(plots: dict[str, Path], skipped: dict[str, str], name: str, alt: str) -> list[str]:
    if name in plots:
        return [f"![{alt}]({plots[name].name})", ""]
    return [f"(Plot not drawn: {skipped.get(name, 'unknown reason')})", ""]


def _plot_scenarios(comps: Any, out_dir: Path, number: int) -> Path:
    from tuner.report._plots import plot_scenarios

    return plot_scenarios(comps, out_dir / "scenarios.png", best_number=number)


def _plot_importances(study: optuna.Study, out_dir: Path, evaluator: Any, target: Any, name: str) -> Path:
    from tuner.report._plots import plot_importances

    return plot_importances(study, out_dir / "importances.png", evaluator=evaluator, target=target, target_name=name)


def _plot_history(study: optuna.Study, out_dir: Path, target: Any, name: str) -> Path:
    from tuner.report._plots import plot_history

    return plot_history(study, out_dir / "history.png", target=target, target_name=name)


def _plot_map(trials: list[FrozenTrial], out_dir: Path, x: str, y: str, name: str, title: str) -> Path:
    from tuner.report._plots import plot_param_map

    return plot_param_map(trials, out_dir / "map.png", x=x, y=y, score=rank_value, score_name=name, title=title)
