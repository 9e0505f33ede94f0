"""The morning-after report: a Markdown file and its PNG plots, built from the study alone.

Every section names the same recommended trial (:func:`tuner.trials.recommended`) with the same figure
(:mod:`tuner.report._facts`): the report is one more view of the study's one answer, never its own ranking.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig
from tuner.metrics import LATENCY_MEASURES
from tuner.objective import objective_of
from tuner.report._export import export_dropin, launch_text
from tuner.report._facts import (
    baseline_drift,
    compare_scenarios,
    failure_groups,
    figure_text,
    params_text,
    recommendation_lines,
    scenario_figure,
    scenario_text,
    speedup_clause,
    study_speedup,
    tune_command,
)
from tuner.report._importance import LABEL, feasible_study, importance_target, importances
from tuner.report._slo import RatePoint, closest_slo_lines, rate_points, slo_line, slo_object, slo_sentence
from tuner.space import format_value
from tuner.trials import (
    Outcome,
    Recommendation,
    baseline_trial,
    closest_to_slo,
    counted_trials,
    feasible,
    is_counted,
    rank_value,
    recommended,
    record_of,
    study_record,
    study_trials,
)

__all__ = ["Report", "build_report"]


@dataclass(frozen=True, kw_only=True)
class Report:
    path: Path
    plots: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Plots or sections that could not be drawn, with the reason (also written into the report)."""
    best_number: int | None = None
    """The recommended trial."""


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _target_of(t: FrozenTrial) -> str:
    fingerprint = record_of(t).target_fingerprint
    return fingerprint if fingerprint is not None else "(not recorded)"


def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def build_report(study: optuna.Study, config: StudyConfig, out_dir: Path, *, storage: str | None = None) -> Report:
    """Write ``out_dir/report.md`` and its PNGs; every failure to draw a plot is said in the report itself.

    ``storage``: the URL the study was opened from (for the commands the report suggests; default: the config's).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    writer = _ReportWriter(study, config, out_dir, storage=storage or config.study.storage)
    for section in (
        writer.header,
        writer.recommendation,
        writer.speedup,
        writer.latency_vs_rate,
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

    def __init__(self, study: optuna.Study, config: StudyConfig, out_dir: Path, *, storage: str) -> None:
        self.study = study
        self.config = config
        self.out_dir = out_dir
        self.storage = storage
        self.scenarios = [s.name for s in config.benchmark.scenarios]
        self.trials = study_trials(study)
        self.rec: Recommendation | None = recommended(study)
        self.best = self.rec.trial if self.rec else None
        self.baseline = baseline_trial(study)
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
        if name in self.plots:
            self.md += [f"![{alt}]({self.plots[name].name})", ""]
        else:
            self.md += [f"(Plot not drawn: {self.skipped.get(name, 'unknown reason')})", ""]

    def finish(self) -> Report:
        path = self.out_dir / "report.md"
        path.write_text("\n".join(self.md).rstrip() + "\n")
        best = self.best.number if self.best else None
        return Report(path=path, plots=self.plots, skipped=self.skipped, best_number=best)

    def command(self, verb: str) -> str:
        return tune_command(verb, self.config, storage=self.storage, study=self.study.study_name)

    # -- sections ------------------------------------------------------------------------------------------

    def header(self) -> None:
        trials, study = self.trials, self.study
        states = Counter(t.state.name for t in trials)
        records = [record_of(t) for t in trials]
        rejected = sum(1 for r in records if r.rejected)
        repeats = sum(1 for r in records if r.duplicate_of is not None)
        outcomes = Counter(Outcome.of(t) for t in trials if is_counted(t))
        always = (Outcome.FEASIBLE, Outcome.WRONG, Outcome.SLOWER)
        counts = ", ".join(f"{outcomes[o]} {o}" for o in tuple(Outcome) if outcomes[o] or o in always)
        starts = [t.datetime_start for t in trials if t.datetime_start]
        ends = [t.datetime_complete for t in trials if t.datetime_complete]
        span = f"{min(starts):%Y-%m-%d %H:%M} → {max(ends):%Y-%m-%d %H:%M}" if starts and ends else "-"
        facts = study_record(study)
        target = self._target()
        better = "lower" if StudyDirection.MINIMIZE in study.directions else "higher"
        self.md += [
            f"# Tuning report: study `{study.study_name}`",
            "",
            f"Generated {dt.datetime.now():%Y-%m-%d %H:%M} from {self.config.source}. Trials ran {span}.",
            "",
            f"- **{counted_trials(study)}/{target}** counted trials: {counts}.",
            f"- Not counted: {rejected} samples rejected by constraints, {repeats} repeats of measured configs, "
            f"{states.get('FAIL', 0)} interrupted or environment faults, {states.get('RUNNING', 0)} running.",
            f"- Objective: {', '.join(study.metric_names or ['score'])} ({better} is better). A score is the lower "
            f"end of the objective's {self.config.benchmark.confidence:.0%} interval, shown as "
            "`score (point ± half-width)`.",
        ]
        if (warmups := facts.warmups) is not None:
            self.md.append(f"- {warmups[0].upper()}{warmups[1:]}.")
        if (warm := study_record(study).warm_start) is not None:
            self.md += [f"- {line[0].upper()}{line[1:]}." for line in warm.lines()]
        self.md.append("")

    def recommendation(self) -> None:
        self.md += ["## Recommendation", ""]
        rec, best = self.rec, self.best
        if rec is None or best is None:
            self.md += self._no_recommendation()
            return
        lines = recommendation_lines(self.study, self.config, rec, finish=self.command("finish"))
        self.md += [f"**{lines[0][0].upper()}{lines[0][1:]}.**", "", *(f"{line}." for line in lines[1:])]
        confirmed = study_record(self.study).confirmation_text
        if confirmed and rec.confirmed:
            self.md += ["", confirmed[0].upper() + confirmed[1:] + "."]
        if rec.front:
            others = ", ".join(f"#{t.number} ({figure_text(t, self.config)})" for t in rec.front if t is not best)
            self.md += ["", f"Pareto front (feasible): the others are {others}."]
        self.md += ["", *self._params_table(best)]
        self.md += ["", "Launch command:", "", "```sh", launch_text(self.config, best), "```", ""]
        self.md += [f"Deploy it: `{self.command('apply --best')}`.", ""]
        try:
            dropin = export_dropin(self.study, self.config, best)
            self.md += ["systemd drop-in (`tune export --format dropin`):", "", "```ini", dropin.rstrip(), "```", ""]
        except Exception as exc:
            self.md += [f"(No systemd drop-in: {exc})", ""]

    def _no_recommendation(self) -> list[str]:
        """Nothing to recommend: when configs missed only the SLO, the closest one, marked as not meeting it (its
        latency is in *Latency against offered rate*); "yet" only while the study has trials left to run."""
        closest = closest_to_slo(self.study)
        if closest is None:
            ended = counted_trials(self.study) >= self._target()
            head = "No feasible trial" + ("" if ended else " yet") + ": nothing to recommend."
            return [f"**{head}** See *Failures* below for why configs failed.", ""]
        lines = closest_slo_lines(self.study, self.config)
        return [
            f"**{lines[0][0].upper()}{lines[0][1:]}.**",
            "",
            f"{lines[1][0].upper()}{lines[1][1:]}; {lines[2].strip()}.",
            "",
            "Its launch command (it does **not** meet the SLO):",
            "",
            "```sh",
            launch_text(self.config, closest),
            "```",
            "",
        ]

    def _target(self) -> int:
        facts = study_record(self.study)
        return facts.target_trials if facts.target_trials is not None else self.config.study.trials

    def _params_table(self, best: FrozenTrial) -> list[str]:
        baseline = self.baseline
        rows = ["| param | recommended | baseline |", "|---|---|---|"]
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
            missing = "was not measured" if baseline is None else f"did not complete ({Outcome.text(baseline)})"
            self.md += [f"The baseline {missing}: no speed-up can be computed.", ""]
            return
        if baseline.number == best.number:
            self.md += ["The baseline itself is the recommendation: no tried change beat it.", ""]
        elif (overall := study_speedup(self.study, self.config, best)) is not None:
            self.md += [f"**Objective: {speedup_clause(overall)}.**", ""]
        if drift := baseline_drift(self.study, self.config):
            self.md += [f"Note: {drift}.", ""]
        comps = compare_scenarios(best, baseline, self.scenarios)
        self.md += [
            f"Baseline = trial #{baseline.number}, recommended = trial #{best.number}, each by its own trial's "
            "measurement. tok/s is the scenario's "
            f"point estimate (geometric mean of its repeats) ± the half-width of its "
            f"{self.config.benchmark.confidence:.0%} interval (`[benchmark] confidence`; the study's pooled noise "
            "gives one repeat an interval too); the speed-up's interval adds the two intervals on logs.",
            "",
            "| scenario | baseline tok/s | recommended tok/s | speed-up | accept length (base → recommended) |",
            "|---|---|---|---|---|",
        ]
        noisy = []
        for c in comps:
            speed = "-" if c.speedup is None else f"**{c.speedup.text}**"
            if c.speedup is not None and c.speedup.within_noise:
                noisy.append(c.scenario)
            self.md.append(
                f"| {c.scenario} | {scenario_text(baseline, c.scenario)} | {scenario_text(best, c.scenario)} "
                f"| {speed} | {_fmt(c.baseline_accept_length, 2)} → {_fmt(c.accept_length, 2)} |"
            )
        self.md.append("")
        if noisy:
            self.md += [f"Within the noise (interval contains 1.0x): {', '.join(noisy)}.", ""]
        level = self.config.benchmark.confidence
        self.draw("scenarios", lambda: _plot_scenarios(comps, self.out_dir, best.number, level))
        self.image("scenarios", "Per-scenario tok/s, baseline vs recommended")

    def latency_vs_rate(self) -> None:
        """``[slo]`` with open-loop scenarios: the rate up to which each config keeps the promise, and a plot
        (when none keeps it: the closest one's, against the baseline's)."""
        best, baseline = self.best, self.baseline
        closest = closest_to_slo(self.study) if best is None else None
        shown = best or closest
        if shown is None or not rate_points(shown, self.config):
            return
        self.md += ["## Latency against offered rate", ""]
        if best is not None:
            brackets = objective_of(self.config).brackets(self.study, best, baseline)
            sentence = slo_sentence(best, baseline, self.config, brackets=brackets)
            own = "The recommendation met the SLO at no rate measured (feasible on the scenarios it was judged in)."
            self.md += [f"**Recommended, in its own trial: {sentence}.**" if sentence else own, ""]
            if line := self._confirmed_slo(best):
                self.md += [f"On re-measurement (the confirmation's visits, fresh arrivals each round): {line}.", ""]
            label = f"recommended (#{shown.number})"
        else:
            self.md += [f"No config met the SLO; the closest, #{shown.number}, against the baseline:", ""]
            label = f"closest (#{shown.number}, misses the SLO)"
        best = shown
        series = {label: rate_points(best, self.config)}
        if baseline is not None and baseline.number != best.number and baseline.state == TrialState.COMPLETE:
            series = {f"baseline (#{baseline.number})": rate_points(baseline, self.config), **series}
        self.md += _latency_table(series, self.config.benchmark.confidence)
        self.draw("latency_rate", lambda: _plot_latency(series, self.out_dir))
        self.image("latency_rate", f"TTFT, TPOT and E2E p99 against offered rate with their intervals, baseline "
                   f"vs {label}, SLO line")  # fmt: skip

    def _confirmed_slo(self, t: FrozenTrial) -> str | None:
        """The confirmation's SLO verdicts of ``t`` in words (None: it did not re-measure ``t``)."""
        confirmed = slo_object(t, self.config, self.study)
        return slo_line(t, self.config, self.study) if confirmed is not None and confirmed["confirmed"] else None

    def top_configs(self) -> None:
        ranked = feasible(self.study)
        self.md += ["## Top 10 feasible configs", ""]
        if not ranked:
            self.md += ["None.", ""]
        else:
            head = "| rank | trial | score | " + " | ".join(f"{s} tok/s" for s in self.scenarios)
            self.md += [head + " | accept | gate | params |", "|" + "---|" * (6 + len(self.scenarios))]
            self.md += [self._top_row(i, t) for i, t in enumerate(ranked[:10], 1)]
            self.md.append("")
        top = ranked[0] if ranked else None
        wrong_fast = [
            t
            for t in self.trials
            if is_counted(t)
            and Outcome.of(t) == Outcome.WRONG
            and t.state == TrialState.COMPLETE
            and (top is None or rank_value(t, self.study.directions) > rank_value(top, self.study.directions))
        ]
        if wrong_fast:
            self.md += [
                "Faster than the best but **infeasible** (wrong answers; never recommended): "
                + ", ".join(f"#{t.number} ({figure_text(t, self.config)}, {Outcome.text(t)})" for t in wrong_fast)
                + ".",
                "",
            ]

    def _top_row(self, rank: int, t: FrozenTrial) -> str:
        toks = " | ".join(scenario_text(t, s) for s in self.scenarios)
        accepts = [a for s in self.scenarios if (a := scenario_figure(t, s, "accept_length")) is not None]
        accept = _fmt(sum(accepts) / len(accepts), 2) if accepts else "-"
        record = record_of(t)
        tag = " (baseline)" if record.is_baseline else ""
        if self.best is not None and t.number == self.best.number:
            tag += " **recommended**"
        if record_of(t).client_bound_scenarios():
            tag += " CLIENT-BOUND"
        return (
            f"| {rank} | #{t.number}{tag} | {figure_text(t, self.config)} | {toks} | {accept} "
            f"| {record.gate if record.gate is not None else '-'} | {_md_cell(params_text(t.params))} |"
        )

    def by_target(self) -> None:
        """A study run with --allow-mixed-targets: scores from different servers are shown apart."""
        counted = [t for t in self.trials if is_counted(t)]
        targets = sorted({_target_of(t) for t in counted})
        if len(targets) < 2:
            return
        self.md += [
            "## By target (mixed hardware: compare scores within one target only)",
            "",
            "| target | counted | feasible | best trial | best score |",
            "|---|---|---|---|---|",
        ]
        ranked = feasible(self.study)
        for target in targets:
            mine = [t for t in counted if _target_of(t) == target]
            good = [t for t in ranked if t in mine]
            best = f"#{good[0].number} | {figure_text(good[0], self.config)}" if good else "- | -"
            self.md.append(f"| {_md_cell(target)} | {len(mine)} | {len(good)} | {best} |")
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
                self.md.append(f"| {g.phase} | {_md_cell(g.example[:200])} | {len(g.trials)} | {g.trials_text} |")
            self.md.append("")
        slower = sum(1 for t in self.trials if is_counted(t) and Outcome.of(t) == Outcome.SLOWER)
        saved = sum(record_of(t).pruning_saved_s or 0.0 for t in self.trials)
        if slower:
            self.md += [
                f"{slower} configs were pruned for being confidently slower than the best (not failures: they "
                f"started and served); stopping them early saved about {saved / 60:.1f} min of benchmarking.",
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
            f"{LABEL} (how much each parameter separates the best configs from the rest; indicative with few "
            "trials; `tune dashboard` shows the same ranking):",
            "",
            "| param | importance |",
            "|---|---|",
        ]
        self.md += [f"| {k} | {v:.3f} |" for k, v in ranking.items()]
        self.md.append("")
        copy = feasible_study(self.study)
        target, name = importance_target(self.study)
        self.draw("importances", lambda: _plot_importances(copy, self.out_dir, evaluator, target, name))
        self.image("importances", "Parameter importances")

    def history(self) -> None:
        self.md += ["## Optimisation history", ""]
        if not any(is_counted(t) for t in self.trials):
            self.md += ["No counted trial yet.", ""]
            self.skipped["history"] = "no counted trial"
            return
        self.md += [
            "Every counted trial: feasible ones at their score, pruned ones at the objective they were heading "
            "for when stopped, failed ones on the floor. The line is the best score so far among the configs "
            "the study could recommend: it ends at the recommended trial.",
            "",
        ]
        self.draw("history", lambda: _plot_history(self.study, self.config, self.out_dir, self.rec))
        self.image("history", "Optimisation history")

    def score_map(self) -> None:
        from tuner.report._map import map_view

        view = map_view(self.config, self.trials, self.best, self.ranking)
        self.md += [f"## Score map: {view.title if view else 'two numeric parameters'}", ""]
        if view is None or not view.trials:
            why = "needs two numeric parameters active in the recommended config's branch"
            self.md += [f"{why[0].upper()}{why[1:]}.", ""]
            self.skipped["map"] = why
            return
        self.draw("map", lambda: _plot_map(view, self.out_dir, self.config))
        self.md += [
            f"`{view.x}` × `{view.y}` over the {len(view.trials)} counted trials of {view.branch_text}: colour = "
            "score of feasible trials (and of ungated ones where only finalists are gated), ★ = recommended, "
            "olive □ = not gated (behind the best), red × = infeasible (wrong answers), orange × = infeasible (misses "
            "the SLO), blue ◇ = pruned (slower than the best), grey ○ = failed (did not start, died under load).",
            "",
        ]
        self.image("map", f"{view.x} x {view.y}")


def _plot_scenarios(comps: Any, out_dir: Path, number: int, confidence: float) -> Path:
    from tuner.report._plots import plot_scenarios

    return plot_scenarios(comps, out_dir / "scenarios.png", best_number=number, confidence=confidence)


def _latency_table(series: dict[str, list[RatePoint]], confidence: float) -> list[str]:
    """Each config's p99s per open-loop scenario, each with its interval (``none``: too few requests for it)."""
    md = [
        f"p99 of the requests with its {confidence:.0%} interval (two of the measured requests by rank, "
        "docs/measuring.md); `none`: too few requests for that bound.",
        "",
        "| config | scenario | offered req/s | SLO attainment | "
        + " | ".join(f"{m.label} p99 {m.unit}" for m in LATENCY_MEASURES)
        + " |",
        "|---|---|---|---|" + "---|" * len(LATENCY_MEASURES),
    ]
    for label, points in series.items():
        for p in points:
            cells = [f.text(m.scale) if (f := p.p99.get(m.key)) is not None else "-" for m in LATENCY_MEASURES]
            v = p.verdict
            words = {"met": " ✓", "missed": " × (misses)", "undecided": " (not shown)"}
            attainment = "-" if v is None or v.attainment is None else f"{v.attainment:.1%}{words.get(v.state, '')}"
            md.append(f"| {label} | {p.scenario} | {p.rate:g} | {attainment} | " + " | ".join(cells) + " |")
    return [*md, ""]


def _plot_latency(series: Any, out_dir: Path) -> Path:
    from tuner.report._plots import plot_latency_vs_rate

    return plot_latency_vs_rate(series, out_dir / "latency_rate.png")


def _plot_importances(study: optuna.Study, out_dir: Path, evaluator: Any, target: Any, name: str) -> Path:
    from tuner.report._plots import plot_importances

    return plot_importances(study, out_dir / "importances.png", evaluator=evaluator, target=target, target_name=name)


def _plot_history(study: optuna.Study, config: StudyConfig, out_dir: Path, rec: Recommendation | None) -> Path:
    from tuner.report._plots import plot_history

    return plot_history(study, config, out_dir / "history.png", recommended=rec)


def _plot_map(view: Any, out_dir: Path, config: StudyConfig) -> Path:
    from tuner.report._plots import plot_param_map

    return plot_param_map(view, out_dir / "map.png", score_name=(config.objective.metric))
