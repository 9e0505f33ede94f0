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
from tuner.trials import (
    attrs,
    client_bound_scenarios,
    confirmation_text,
    counted_trials,
    is_counted,
    is_feasible,
    study_trials,
)

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
    copy.add_trials([t for t in study_trials(study) if is_counted(t) and is_feasible(t)])
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
    writer = _ReportWriter(study, config, out_dir)
    for section in (
        writer.header,
        writer.recommendation,
        writer.speedup,
        writer.top_configs,
        writer.by_target,
        writer.failures,
        writer.importances,
        writer.history,
        writer.score_map,
    ):
        section()
    return writer.finish()


class _ReportWriter:
    """The report's sections, in order; each appends its Markdown and draws its plots."""

    def __init__(self, study: optuna.Study, config: StudyConfig, out_dir: Path) -> None:
        self.study = study
        self.config = config
        self.out_dir = out_dir
        self.scenarios = [s.name for s in config.benchmark.scenarios]
        self.trials = study_trials(study)
        self.best_list = best_feasible(study)
        self.best = choose_trial(study) if self.best_list else None
        self.baseline = baseline_trial(study)
        self.target, self.target_name = _target(study)
        self.ranking: dict[str, float] = {}
        self.plots: dict[str, Path] = {}
        self.skipped: dict[str, str] = {}
        self.md: list[str] = []

    def draw(self, name: str, fn: Callable[[], Path]) -> None:
        try:
            self.plots[name] = fn()
        except Exception as exc:  # one broken plot must not cost the whole morning report
            self.skipped[name] = f"{type(exc).__name__}: {exc}"

    def image(self, name: str, alt: str) -> None:
        self.md += _image(self.plots, self.skipped, name, alt)

    def finish(self) -> Report:
        path = self.out_dir / "report.md"
        path.write_text("\n".join(self.md).rstrip() + "\n")
        best = self.best.number if self.best else None
        return Report(path=path, plots=self.plots, skipped=self.skipped, best_number=best)

    # -- sections ------------------------------------------------------------------------------------------

    def header(self) -> None:
        trials, study = self.trials, self.study
        states = Counter(t.state.name for t in trials)
        rejected = sum(1 for t in trials if t.user_attrs.get(attrs.REJECTED))
        repeats = sum(1 for t in trials if t.user_attrs.get(attrs.DUPLICATE_OF) is not None)
        outcomes = Counter(outcome(t) for t in trials if is_counted(t))
        always = ("feasible", "infeasible (gate)", "regression-pruned")
        outcome_text = ", ".join(f"{outcomes[o]} {o}" for o in OUTCOMES if outcomes[o] or o in always)
        starts = [t.datetime_start for t in trials if t.datetime_start]
        ends = [t.datetime_complete for t in trials if t.datetime_complete]
        span = f"{min(starts):%Y-%m-%d %H:%M} → {max(ends):%Y-%m-%d %H:%M}" if starts and ends else "-"
        self.md += [
            f"# Tuning report: study `{study.study_name}`",
            "",
            f"Generated {dt.datetime.now():%Y-%m-%d %H:%M} from {self.config.source}. Trials ran {span}.",
            "",
            f"- **{counted_trials(study)}/{self.config.study.trials}** counted trials: {outcome_text}.",
            f"- Not counted: {rejected} samples rejected by constraints, {repeats} repeats of measured configs, "
            f"{states.get('FAIL', 0)} interrupted, {states.get('RUNNING', 0)} running.",
            f"- Objective: {', '.join(study.metric_names or ['score'])} (higher is better).",
        ]
        if isinstance(warmups := study.user_attrs.get(attrs.WARMUPS), str):
            self.md.append(f"- {warmups[0].upper()}{warmups[1:]}.")
        self.md.append("")

    def recommendation(self) -> None:
        self.md += ["## Recommendation", ""]
        best, baseline = self.best, self.baseline
        if best is None:
            self.md += [
                "**No feasible trial yet: nothing to recommend.** See *Failures* below for why configs failed.",
                "",
            ]
            return
        base_score = baseline.values[0] if baseline is not None and baseline.values and len(best.values) == 1 else None
        gain = f" ({best.values[0] / base_score:.2f}x the baseline's {base_score:.1f})" if base_score else ""
        self.md += [
            f"**Best feasible config: trial #{best.number}**, score {_score(best)}{gain}, "
            f"gate {best.user_attrs.get(attrs.GATE, 'n/a')}.",
            "",
        ]
        if bound := client_bound_scenarios(best):
            self.md += [
                f"**Client-bound**: {', '.join(bound)} of trial #{best.number} was measured while the load "
                "generator was the bottleneck, so its figures understate the server and the ranking may be "
                "wrong; raise `[benchmark] client_processes` and re-measure (`tune best --confirm`).",
                "",
            ]
        confirmed = confirmation_text(self.study)
        self.md += [
            (confirmed[0].upper() + confirmed[1:] + ".")
            if confirmed
            else "Not confirmed: the top configs were not re-measured (`tune best --confirm` does it).",
            "",
        ]
        if len(self.best_list) > 1:
            others = ", ".join(f"#{t.number} ({_score(t)})" for t in self.best_list if t.number != best.number)
            self.md += [
                f"Pareto front (feasible): #{best.number} is its member with the highest geometric mean; "
                f"the others are {others}.",
                "",
            ]
        self.md += self._params_table(best)
        self.md += ["", "Launch command:", "", "```sh", launch_spec(self.config, best).shell_text(), "```", ""]
        try:
            dropin = export_dropin(self.study, self.config, best)
            self.md += ["systemd drop-in (`tune export --format dropin`):", "", "```ini", dropin.rstrip(), "```", ""]
        except Exception as exc:
            self.md += [f"(No systemd drop-in: {exc})", ""]

    def _params_table(self, best: FrozenTrial) -> list[str]:
        baseline = self.baseline
        rows = ["| param | best | baseline |", "|---|---|---|"]
        for p in self.config.space.params:
            b = best.params.get(p.name)
            base_v = baseline.params.get(p.name) if baseline is not None else self.config.baseline.get(p.name)
            mark = "" if b == base_v else " ←"
            rows.append(
                f"| {p.name} | {format_value(b) if b is not None else '(inactive)'}{mark} "
                f"| {format_value(base_v) if base_v is not None else '(inactive)'} |"
            )
        return rows

    def speedup(self) -> None:
        self.md += ["## Speed-up over the baseline", ""]
        best, baseline = self.best, self.baseline
        if best is None:
            self.md += ["No feasible trial to compare.", ""]
            return
        if baseline is None or baseline.state != TrialState.COMPLETE:
            missing = "was not measured" if baseline is None else f"did not complete ({feasibility_label(baseline)})"
            self.md += [f"The baseline {missing}: no speed-up can be computed.", ""]
            return
        if baseline.number == best.number:
            self.md += ["The baseline itself is the best feasible config: no tried change beat it.", ""]
        comps = compare_scenarios(best, baseline, self.scenarios)
        self.md += [
            f"Baseline = trial #{baseline.number} ({feasibility_label(baseline)}), best = trial #{best.number}. "
            "tok/s is the scenario's median over repeats with the score's "
            f"{self.config.benchmark.confidence:.0%} interval (`[benchmark] confidence`; the study's pooled noise "
            "gives one repeat an interval too); the speed-up's interval is a bootstrap of the ratio of medians "
            "over the two trials' repeats (crude with 2-3 repeats, none with one).",
            "",
            "| scenario | baseline tok/s | best tok/s | speed-up | accept length (base → best) |",
            "|---|---|---|---|---|",
        ]
        noisy = []
        for c in comps:
            speed = "-" if c.speedup is None else f"**{c.speedup:.2f}x**{_ci(c.speedup_ci, 2)}"
            if c.speedup_ci and c.speedup_ci[0] <= 1.0 <= c.speedup_ci[1]:
                noisy.append(c.scenario)
            self.md.append(
                f"| {c.scenario} | {_fmt(c.baseline_tok_s)}{_ci(c.baseline_ci)} | {_fmt(c.best_tok_s)}{_ci(c.best_ci)} "
                f"| {speed} | {_fmt(c.baseline_accept_length, 2)} → {_fmt(c.accept_length, 2)} |"
            )
        self.md.append("")
        if noisy:
            self.md += [f"Within the noise (interval contains 1.0x): {', '.join(noisy)}.", ""]
        level = self.config.benchmark.confidence
        self.draw("scenarios", lambda: _plot_scenarios(comps, self.out_dir, best.number, level))
        self.image("scenarios", "Per-scenario tok/s, baseline vs best")

    def top_configs(self) -> None:
        scenarios, trials = self.scenarios, self.trials
        ranked = sorted(
            (t for t in trials if is_counted(t) and is_feasible(t)), key=lambda t: (-rank_value(t), t.number)
        )
        self.md += ["## Top 10 feasible configs", ""]
        if not ranked:
            self.md += ["None.", ""]
        else:
            head = "| rank | trial | score | " + " | ".join(f"{s} tok/s" for s in scenarios)
            self.md += [head + " | accept | gate | params |", "|" + "---|" * (6 + len(scenarios))]
            self.md += [_top_row(i, t, scenarios) for i, t in enumerate(ranked[:10], 1)]
            self.md.append("")
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
            self.md += [
                "Faster than the best but **infeasible** (wrong answers; never recommended): "
                + ", ".join(f"#{t.number} ({_score(t)}, {feasibility_label(t)})" for t in wrong_fast)
                + ".",
                "",
            ]

    def by_target(self) -> None:
        """A study run with --allow-mixed-targets: scores from different servers are shown apart."""
        counted = [t for t in self.trials if is_counted(t)]
        targets = sorted({str(t.user_attrs.get(attrs.TARGET_FINGERPRINT, "(not recorded)")) for t in counted})
        if len(targets) < 2:
            return
        self.md += [
            "## By target (mixed hardware: compare scores within one target only)",
            "",
            "| target | counted | feasible | best trial | best score |",
            "|---|---|---|---|---|",
        ]
        for target in targets:
            mine = [t for t in counted if str(t.user_attrs.get(attrs.TARGET_FINGERPRINT, "(not recorded)")) == target]
            feasible = sorted((t for t in mine if is_feasible(t)), key=lambda t: (-rank_value(t), t.number))
            best = f"#{feasible[0].number} | {_score(feasible[0])}" if feasible else "- | -"
            self.md.append(f"| {_md_cell(target)} | {len(mine)} | {len(feasible)} | {best} |")
        self.md.append("")

    def failures(self) -> None:
        groups = failure_groups(self.study)
        self.md += ["## Failures by reason", ""]
        if not groups:
            self.md += ["No counted trial failed or was infeasible.", ""]
        else:
            phases: Counter[str] = Counter()
            for g in groups:
                phases[g.phase] += len(g.trials)
            self.md += [
                "By outcome: " + ", ".join(f"{p} {n}" for p, n in phases.most_common()) + ".",
                "",
                "| outcome | reason | count | trials |",
                "|---|---|---|---|",
            ]
            for g in groups:
                shown = ", ".join(f"#{n}" for n in g.trials[:12]) + (" …" if len(g.trials) > 12 else "")
                self.md.append(f"| {g.phase} | {_md_cell(g.example[:200])} | {len(g.trials)} | {shown} |")
            self.md.append("")
        saved = sum(float(t.user_attrs.get(attrs.PRUNING_SAVED_S) or 0) for t in self.trials)
        if saved:
            self.md += [
                f"Early stopping of confidently slower configs saved about {saved / 60:.1f} min of benchmarking.",
                "",
            ]

    def importances(self) -> None:
        self.md += ["## Parameter importance", ""]
        ranking, evaluator, why = importances(self.study)
        self.ranking = ranking
        if why is not None:
            self.md += [f"Skipped: {why}.", ""]
            self.skipped["importances"] = why
            return
        self.md += [
            "PED-ANOVA over feasible trials (how much each parameter separates the best configs from the rest; "
            "indicative with few trials):",
            "",
            "| param | importance |",
            "|---|---|",
        ]
        self.md += [f"| {k} | {v:.3f} |" for k, v in ranking.items()]
        self.md.append("")
        feasible_copy = _feasible_study(self.study)
        self.draw(
            "importances",
            lambda: _plot_importances(feasible_copy, self.out_dir, evaluator, self.target, self.target_name),
        )
        self.image("importances", "Parameter importances")

    def history(self) -> None:
        self.md += ["## Optimisation history", ""]
        if any(t.state == TrialState.COMPLETE for t in self.trials):
            self.draw("history", lambda: _plot_history(self.study, self.out_dir, self.target, self.target_name))
            self.image("history", "Optimisation history")
        else:
            self.md += ["No completed trial yet.", ""]
            self.skipped["history"] = "no completed trial"

    def score_map(self) -> None:
        axes = _map_axes(self.config, self.ranking)
        self.md += [f"## Score map: {axes[2] if axes else 'two numeric parameters'}", ""]
        if axes is None:
            self.md += ["Needs two numeric parameters in the search space.", ""]
            self.skipped["map"] = "fewer than two numeric parameters"
            return
        x, y, title = axes
        mapped = [t for t in self.trials if is_counted(t) and x in t.params and y in t.params]
        if not mapped:
            self.md += [f"No counted trial set both `{x}` and `{y}`.", ""]
            self.skipped["map"] = f"no trial with both {x} and {y}"
            return
        self.draw("map", lambda: _plot_map(mapped, self.out_dir, x, y, self.target_name, title))
        self.md += [
            f"`{x}` × `{y}` over {len(mapped)} counted trials: colour = score of feasible trials (and of ungated ones "
            "where only finalists are gated), olive □ = not gated (behind the best), red × = infeasible, "
            "blue ◇ = regression-pruned (slower than the "
            "best), grey ○ = failed.",
            "",
        ]
        self.image("map", f"{x} x {y}")


def _top_row(rank: int, t: FrozenTrial, scenarios: list[str]) -> str:
    toks = " | ".join(_fmt(scenario_figure(t, s, "tok_s")) for s in scenarios)
    accepts = [a for s in scenarios if (a := scenario_figure(t, s, "accept_length")) is not None]
    accept = _fmt(sum(accepts) / len(accepts), 2) if accepts else "-"
    tag = " (baseline)" if t.user_attrs.get(attrs.BASELINE) else ""
    if client_bound_scenarios(t):
        tag += " CLIENT-BOUND"
    return (
        f"| {rank} | #{t.number}{tag} | {_score(t)} | {toks} | {accept} | {t.user_attrs.get(attrs.GATE, '-')} "
        f"| {_md_cell(params_text(t.params))} |"
    )


def _image(plots: dict[str, Path], skipped: dict[str, str], name: str, alt: str) -> list[str]:
    if name in plots:
        return [f"![{alt}]({plots[name].name})", ""]
    return [f"(Plot not drawn: {skipped.get(name, 'unknown reason')})", ""]


def _plot_scenarios(comps: Any, out_dir: Path, number: int, confidence: float) -> Path:
    from tuner.report._plots import plot_scenarios

    return plot_scenarios(comps, out_dir / "scenarios.png", best_number=number, confidence=confidence)


def _plot_importances(study: optuna.Study, out_dir: Path, evaluator: Any, target: Any, name: str) -> Path:
    from tuner.report._plots import plot_importances

    return plot_importances(study, out_dir / "importances.png", evaluator=evaluator, target=target, target_name=name)


def _plot_history(study: optuna.Study, out_dir: Path, target: Any, name: str) -> Path:
    from tuner.report._plots import plot_history

    return plot_history(study, out_dir / "history.png", target=target, target_name=name)


def _plot_map(trials: list[FrozenTrial], out_dir: Path, x: str, y: str, name: str, title: str) -> Path:
    from tuner.report._plots import plot_param_map

    return plot_param_map(trials, out_dir / "map.png", x=x, y=y, score=rank_value, score_name=name, title=title)
