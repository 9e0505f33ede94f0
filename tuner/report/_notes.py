"""Notes and marks the dashboard shows: the study note (target, space, objective) and per-trial verdicts.

optuna-dashboard 0.21 ignores Optuna 5 constraints: it would show a fast-but-wrong trial as "Best trial" and
plot it like any other. So the verdict is written where the dashboard does look: a ``feasible`` user attr
(set by the loop before ``tell``, see :func:`mark_feasibility`) and a trial note (written at any time, since
notes live in the study's system attrs, unlike user attrs which freeze when a trial finishes).
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig
from tuner.report._facts import feasibility_label, infeasibility, recommended
from tuner.space import Param, format_value
from tuner.target import base_spec
from tuner.trials import (
    attrs,
    client_bound_scenarios,
    current_trial,
    gate_pending,
    storage_of,
    study_id,
    study_trials,
    trial_id,
)

__all__ = [
    "FEASIBLE_ATTR",
    "NOTE_MARKER",
    "annotate_trials",
    "mark_feasibility",
    "study_note_text",
    "trial_note_text",
    "write_study_note",
]

FEASIBLE_ATTR = "feasible"
NOTE_MARKER = "<!-- written by tune; edit freely: tune stops updating a note once it no longer starts so -->"


def mark_feasibility(trial: optuna.Trial) -> str:
    """Set the ``feasible`` user attr from the trial's constraints and gate verdict; call it before ``tell``.

    The value is ``"yes"`` or ``"INFEASIBLE gate 3/5"``: a string, so the dashboard's trial table shows the
    reason in the column rather than a bare False.
    """
    frozen = current_trial(trial)
    why = infeasibility(frozen.constraints, frozen.user_attrs)
    label = "yes" if why is None else f"INFEASIBLE {why}"
    trial.set_user_attr(FEASIBLE_ATTR, label)
    return label


def _range(p: Param) -> str:
    if p.kind == "categorical":
        text = ", ".join(format_value(c) for c in p.choices)
        return f"{{{text}}}" + (f" (`{format_value(p.absent)}` = flag left out)" if p.absent is not None else "")
    if p.kind == "bool":
        return "{true, false}"
    step = f" step {format_value(p.step)}" if p.step is not None else ""
    log = " log" if p.log else ""
    assert p.low is not None and p.high is not None  # numeric kinds always have bounds
    return f"[{format_value(p.low)}, {format_value(p.high)}]{step}{log}"


def _where(p: Param) -> str:
    places = []
    if p.flag:
        places.append(f"`{p.flag}`" + "".join(f" / `{a}`" for a in p.aliases))
    if p.env:
        places.append(f"env `{p.env}`")
    return " + ".join(places)


def study_note_text(config: StudyConfig, *, study_name: str | None = None) -> str:
    """Markdown describing what is tuned, where, against what, and how "best" is decided."""
    lines = [
        NOTE_MARKER,
        f"# tune study `{study_name or config.study.name}`",
        "",
        *_target_lines(config),
        *_space_lines(config),
        *_objective_lines(config),
        *_gate_lines(config),
        "",
        "**Reading this dashboard:** it ignores Optuna's constraints, so check the `feasible` column "
        "(`INFEASIBLE gate 3/5`) and trial notes. `tune dashboard` serves a corrected *Best trial*; "
        "`tune best`, `tune report` and `tune export` only ever name feasible trials.",
    ]
    return "\n".join(lines) + "\n"


def _target_lines(config: StudyConfig) -> list[str]:
    t = config.target
    manager = t.manager
    if t.manager == "systemd" and t.systemd is not None:
        manager = f"systemd unit `{t.systemd.unit}` (trials are drop-ins `{t.systemd.dropin_name}`)"
    where = "this machine" if t.transport == "local" or t.ssh is None else f"`{t.ssh.host}` over SSH"
    return [
        f"**Target:** {t.base_url} on {where}, managed as {manager}.",
        "",
        "**Base command** (trial 0, the baseline, runs it unchanged):",
        "",
        "```sh",
        base_spec(t).shell_text(),
        "```",
        "",
    ]


def _space_lines(config: StudyConfig) -> list[str]:
    lines = [
        "## Search space",
        "",
        "| param | type | range / choices | sets | only when | baseline |",
        "|---|---|---|---|---|---|",
    ]
    for p in config.space.params:
        when = ", ".join(str(c) for c in p.when) or "always"
        base = format_value(config.baseline.get(p.name, "-"))
        lines.append(f"| {p.name} | {p.kind} | {_range(p)} | {_where(p)} | {when} | {base} |")
    if config.space.constraints:
        lines += [
            "",
            "**Constraints** (violating samples are rejected without a restart): "
            + "; ".join(f"`{c}`" for c in config.space.constraints),
        ]
    return lines


def _objective_lines(config: StudyConfig) -> list[str]:
    obj = config.objective
    lines = ["", "## Objective", ""]
    if obj.kind == "multi":
        lines.append(
            f"Maximise `{obj.metric}` in each of: " + ", ".join(f"`{n}`" for n in obj.objectives) + " (Pareto front)."
        )
    else:
        lines.append(
            f"Maximise the weighted geometric mean of per-scenario `{obj.metric}` "
            f"(score = lower end of its {config.benchmark.confidence:.0%} interval: per-scenario t intervals on log "
            f"throughput over {_repeats_text(config)}, added in quadrature)."
        )
    if config.benchmark.warmup == "auto":
        lines.append(
            "Warm-up `auto`: none (the first pass counts) while the first passes of runs measured more than once show "
            "a start is not confidently slower than the repeats after it by more than the precision; else a measured "
            "first pass (never counted)."
        )
    lines += ["", "| scenario | concurrency | prompt | output | requests | weight |", "|---|---|---|---|---|---|"]
    for s in config.benchmark.scenarios:
        lines.append(
            f"| {s.name} | {s.concurrency} | {s.prompt_tokens} | {s.output_tokens} | {s.requests} "
            f"| {format_value(s.weight)} |"
        )
    return lines


def _gate_lines(config: StudyConfig) -> list[str]:
    gate = config.gate
    if gate is None or not gate.enabled:
        return ["", "## Correctness", "No correctness gate is configured: every completed trial is feasible."]
    n = gate.count if gate.count is not None else len(gate.tasks)
    return [
        "",
        "## Correctness",
        f"A config must pass {gate.min_passed}/{n} coding problems (run {gate.when} the benchmark). "
        "A faster config that fails is **infeasible**: it is never the best.",
    ]


def _save(storage: optuna.storages.BaseStorage, study_id: int, trial_id: int | None, body: str) -> bool:
    """Write a note unless a human replaced ours; True when written."""
    from optuna_dashboard._note import get_note_from_system_attrs, save_note_with_version

    # save_note() wants a live Trial; a finished trial's note is written through the same versioned keys.
    current = get_note_from_system_attrs(storage.get_study_system_attrs(study_id), trial_id)
    if current["body"] == body:
        return False
    if current["body"] and not current["body"].startswith(NOTE_MARKER):
        return False  # someone edited it in the dashboard: theirs wins
    save_note_with_version(storage, study_id, trial_id, current["version"] + 1, body)
    return True


def write_study_note(study: optuna.Study, config: StudyConfig) -> None:
    """Describe the target, search space and objective in the dashboard's study note (idempotent)."""
    _save(storage_of(study), study_id(study), None, study_note_text(config, study_name=study.study_name))


def trial_note_text(t: FrozenTrial, *, best_numbers: frozenset[int] = frozenset()) -> str | None:
    """The verdict note for one trial, or None when there is nothing to flag."""
    head: str | None = None
    body: list[str] = []
    if t.state == TrialState.COMPLETE and t.number in best_numbers:
        head = (
            "**BEST feasible trial**: the recommendation (the confirmed winner when the top was re-measured), as "
            "of the last `tune dashboard` refresh."
        )
    elif t.state == TrialState.COMPLETE and t.user_attrs.get(attrs.GATE_SKIPPED):
        head = f"**{feasibility_label(t)}**: measured, but too far behind the best to need a correctness verdict."
    elif gate_pending(t):
        head = f"**{feasibility_label(t)}**: measured; the correctness gate runs at the end for the finalists only."
    elif t.state == TrialState.COMPLETE and feasibility_label(t) != "feasible":
        head = f"**{feasibility_label(t)}**: fast or not, it is wrong; it is never eligible as best."
    elif t.state == TrialState.PRUNED and t.user_attrs.get(attrs.REJECTED):
        head = f"Rejected without running: {t.user_attrs.get(attrs.FAILURE_REASON, 'constraint violated')}."
    elif t.state == TrialState.PRUNED and t.user_attrs.get(attrs.DUPLICATE_OF) is not None:
        head = f"Repeat of trial #{t.user_attrs[attrs.DUPLICATE_OF]} (not run again)."
    elif t.state == TrialState.PRUNED:
        phase = t.user_attrs.get(attrs.FAILURE_PHASE, "?")
        head = f"**FAILED** in phase `{phase}`: {t.user_attrs.get(attrs.FAILURE_REASON, '(no reason recorded)')}"
        tail = str(t.user_attrs.get(attrs.LOG_TAIL) or "").splitlines()[-12:]
        if tail:
            body = ["", "Server log (last lines; full log in the artifacts):", "", "```", *tail, "```"]
    elif t.state == TrialState.FAIL and t.user_attrs.get(attrs.INTERRUPTED):
        head = f"Interrupted ({t.user_attrs[attrs.INTERRUPTED]}); retried on resume."
    if bound := client_bound_scenarios(t):
        mark = (
            f"**CLIENT-BOUND** in {', '.join(bound)}: measured while the load generator was the bottleneck, so "
            "these figures understate the server; raise `[benchmark] client_processes` and re-measure."
        )
        head = mark if head is None else f"{head}\n\n{mark}"
    if head is None:
        return None
    if decided := t.user_attrs.get(attrs.REPEATS_DECIDED):
        body = ["", f"Repeats beyond the first pass: {decided}.", *body]
    return "\n".join([NOTE_MARKER, head, *body]) + "\n"


def annotate_trials(study: optuna.Study) -> int:
    """Write verdict notes on every trial that needs one; returns how many notes changed."""
    best = frozenset(t.number for t in recommended(study))
    changed = 0
    for t in study_trials(study):
        if t.state == TrialState.RUNNING:
            continue
        # "" clears a note of ours that no longer applies (a trial that was best earlier but is not now).
        text = trial_note_text(t, best_numbers=best) or ""
        if _save(storage_of(study), study_id(study), trial_id(t), text):
            changed += 1
    return changed


def _repeats_text(config: StudyConfig) -> str:
    b = config.benchmark
    if b.min_repeats == b.max_repeats:
        return f"{b.max_repeats} repeats"
    each = b.scenario_precision
    if config.objective.kind == "multi":
        return f"{b.min_repeats}-{b.max_repeats} repeats, stopping at ±{each:.1%} per scenario or a clear verdict"
    return (
        f"{b.min_repeats}-{b.max_repeats} repeats: {b.min_repeats} of each scenario, then more only while the "
        f"objective is neither clearly behind nor ahead of the last finalist, until ±{b.precision:.2%} on the "
        f"objective (±{each:.1%} per scenario while the study does not know its noise yet)"
    )
