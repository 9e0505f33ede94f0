"""Notes and marks the dashboard shows: the study note (target, space, objective) and per-trial verdicts.

optuna-dashboard 0.21 ignores Optuna 5 constraints: it would show a fast-but-wrong trial as "Best trial" and
plot it like any other. So the verdict is written where the dashboard does look: a ``feasible`` user attr
(set by the loop before ``tell``, see :func:`mark_feasibility`) and a trial note (written at any time, since
notes live in the study's system attrs, unlike user attrs which freeze when a trial finishes).
"""

from __future__ import annotations

import hashlib
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.config import StudyConfig, base_spec
from tuner.objective import Speedup, objective_of
from tuner.report._facts import figure_text, speedup_clause, study_speedup
from tuner.report._importance import LABEL
from tuner.space import Param, format_value
from tuner.trials import Outcome, Recommendation, current_confirmation, recommended, record_of, study_trials, write
from tuner.trials.adapter import current_trial, storage_of, study_id, trial_id

__all__ = [
    "annotate_trials",
    "mark_feasibility",
    "study_note_text",
    "trial_note_text",
    "write_study_note",
]

_OWNED = "tune:note:"
"""Study system attr ``tune:note:<trial id or "study">``: a digest of the note body tune last wrote there. A note
whose body no longer matches was edited by someone in the dashboard: theirs wins, tune stops updating it."""
_LEGACY_MARKER = "<!-- written by tune"
"""How notes were marked before (shown raw by the dashboard): such a note is still tune's to update."""


def mark_feasibility(trial: optuna.Trial) -> str:
    """Set the ``feasible`` user attr from the trial's constraints and gate verdict; call it before ``tell``.

    The value is ``"yes"`` or ``"no: wrong answers (gate 3/5)"``: a string, so the dashboard's trial table shows
    the reason in the column rather than a bare False.
    """
    frozen = current_trial(trial)
    why = record_of(frozen).infeasibility
    label = "yes" if why is None else f"no: wrong answers ({why})"
    write(trial, dashboard_feasible=label)
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
        f"# tune study `{study_name or config.study.name}`",
        "",
        *_target_lines(config),
        *_space_lines(config),
        *_objective_lines(config),
        *_gate_lines(config),
        "",
        "**Reading this dashboard:** `tune dashboard` shows *Best trial* as tune's recommendation (the winner of "
        "the end-of-study re-measurement when there was one: the trial `tune best`, `tune apply --best`, `tune "
        "export` and `tune report` name) and each trial's verdict in its note and in the `feasible` column "
        f"(`no: wrong answers (gate 3/5)`). Parameter importance is tune's own: {LABEL}, as in `tune report`.",
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
        config.secrets.spec(base_spec(t)).shell_text(),
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
    lines = ["", "## Objective", "", objective_of(config).describe(_repeats_text(config))]
    if config.benchmark.warmup == "auto":
        lines.append(
            "Warm-up `auto`: none (the first pass counts) while the first passes of runs measured more than once show "
            "a start is not confidently slower than the repeats after it by more than the precision; else a measured "
            "first pass (never counted)."
        )
    lines += ["", "| scenario | concurrency | prompt | output | requests | weight |", "|---|---|---|---|---|---|"]
    for s in config.benchmark.scenarios:
        lines.append(
            f"| {s.name} | {s.load} | {s.prompt_tokens} | {s.output_tokens} | {s.requests} "
            f"| {format_value(s.weight)} |"
        )
    return lines


_GATE_WHEN = {
    "before": "run before the benchmark",
    "after": "run after the benchmark",
    "contenders": "run on the configs that could become the best",
    "final": "run on the finalists, at the end of the study",
}
"""``[gate] when`` in words, as the study note says it."""


def _gate_lines(config: StudyConfig) -> list[str]:
    gate = config.gate
    if gate is None or not gate.enabled:
        return ["", "## Correctness", "No correctness gate is configured: every completed trial is feasible."]
    n = gate.count if gate.count is not None else len(gate.tasks)
    return [
        "",
        "## Correctness",
        f"A config must pass {gate.min_passed}/{n} coding problems ({_GATE_WHEN.get(gate.when, gate.when)}). "
        "A faster config that fails is **infeasible**: it is never the best.",
    ]


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _save(storage: optuna.storages.BaseStorage, study_id: int, trial_id: int | None, body: str) -> bool:
    """Write a note unless a human replaced ours; True when written."""
    from optuna_dashboard._note import get_note_from_system_attrs, save_note_with_version

    system_attrs = storage.get_study_system_attrs(study_id)
    current = get_note_from_system_attrs(system_attrs, trial_id)
    if current["body"] == body:
        return False
    key = f"{_OWNED}{'study' if trial_id is None else trial_id}"
    ours = current["body"] == "" or system_attrs.get(key) == _digest(current["body"])
    if not ours and not current["body"].startswith(_LEGACY_MARKER):
        return False  # someone edited it in the dashboard: theirs wins
    # save_note() wants a live Trial; a finished trial's note is written through the same versioned keys.
    save_note_with_version(storage, study_id, trial_id, current["version"] + 1, body)
    storage.set_study_system_attr(study_id, key, _digest(body))
    return True


def write_study_note(study: optuna.Study, config: StudyConfig) -> None:
    """Describe the target, search space and objective in the dashboard's study note (idempotent)."""
    _save(storage_of(study), study_id(study), None, study_note_text(config, study_name=study.study_name))


def _recommended_note(rec: Recommendation, config: StudyConfig | None, speedup: Speedup | None) -> str:
    t = rec.trial
    score = f", score {figure_text(t, config)}" if config is not None else ""
    lines = [
        f"**RECOMMENDED**{score}: the trial `tune best`, `tune apply --best`, `tune export` and `tune report` name."
    ]
    if rec.confirmed_value is not None:
        lines.append(f"Confirmed {rec.confirmed_value:.1f} when the top configs were re-measured at the end.")
    if speedup is not None:
        lines.append(f"Speed-up: {speedup_clause(speedup)}.")
    if gate := record_of(t).gate:
        lines.append(f"Correctness gate: {gate}.")
    missing = rec.missing()
    if missing:
        lines.append(f"**NOT VERIFIED**: {' and '.join(missing)}; `tune finish` completes it.")
    return "\n\n".join(lines)


def _verdict_note(t: FrozenTrial, confirmation: Any) -> tuple[str | None, list[str]]:
    """The note's head and body for a trial that is not the recommendation (head None: nothing to flag)."""
    became, words = Outcome.of(t), Outcome.text(t)
    record = record_of(t)
    if t.state == TrialState.COMPLETE and became == Outcome.WRONG:
        return f"**{words}**: fast or not, it is wrong; never recommended.", []
    if became == Outcome.MISSES_SLO:
        return f"**{words}**: fast or not, it breaks the latency promise; never recommended.", []
    if became == Outcome.NOT_GATED:
        return f"**{words}**.", []
    if became in (Outcome.NOT_GATED_YET, Outcome.NOT_FINALIST):
        return f"**{words}**.", []
    if t.state == TrialState.COMPLETE:
        values = confirmation.get("values", {}) if confirmation is not None else {}
        if str(t.number) in values:
            return (
                f"A finalist: re-measured at the end at {_shown(confirmation, t.number)}; the confirmation recommended "
                f"#{confirmation['winner']}.",
                [],
            )
        return None, []
    if t.state != TrialState.PRUNED or record.rejected or record.duplicate_of is not None:
        return (f"{words[0].upper()}{words[1:]}." if t.state in (TrialState.PRUNED, TrialState.FAIL) else None), []
    reason = record.failure_reason if record.failure_reason is not None else "(no reason recorded)"
    if became == Outcome.SLOWER:
        return f"**{words}**: {reason}", []  # a healthy server that was slower: its log proves nothing
    head = f"**{words}** (phase `{record.failure_phase if record.failure_phase is not None else '?'}`): {reason}"
    tail = (record.log_tail or "").splitlines()[-12:]
    if became in (Outcome.NOT_STARTED, Outcome.DIED, Outcome.OTHER) and tail:
        return head, ["", "Server log (last lines; full log in the artifacts):", "", "```", *tail, "```"]
    return head, []


def trial_note_text(
    t: FrozenTrial,
    *,
    rec: Recommendation | None = None,
    confirmation: Any = None,
    config: StudyConfig | None = None,
    speedup: Speedup | None = None,
) -> str | None:
    """The verdict note for one trial, or None when there is nothing to flag (``config``: the study's file, for
    the recommendation's figure; ``speedup``: the recommendation's, as every view prints it)."""
    head: str | None
    body: list[str]
    if rec is not None and t.number == rec.trial.number:
        head, body = _recommended_note(rec, config, speedup), []
    else:
        head, body = _verdict_note(t, confirmation)
    if bound := record_of(t).client_bound_scenarios():
        mark = (
            f"**CLIENT-BOUND** in {', '.join(bound)}: measured while the load generator was the bottleneck, so "
            "these figures understate the server; raise `[benchmark] client_processes` and re-measure."
        )
        head = mark if head is None else f"{head}\n\n{mark}"
    if head is None:
        return None
    if decided := record_of(t).repeats_decided:
        body = ["", f"Repeats beyond the first pass: {decided}.", *body]
    return "\n".join([head, *body]) + "\n"


def annotate_trials(study: optuna.Study, *, config: StudyConfig | None = None) -> int:
    """Write verdict notes on every trial that needs one; returns how many notes changed."""
    rec = recommended(study)
    confirmation = current_confirmation(study)
    speedup = None
    if rec is not None and config is not None and not record_of(rec.trial).is_baseline:
        speedup = study_speedup(study, config, rec.trial)
    changed = 0
    for t in study_trials(study):
        if t.state == TrialState.RUNNING:
            continue
        # "" clears a note of ours that no longer applies (a trial that was best earlier but is not now).
        text = trial_note_text(t, rec=rec, confirmation=confirmation, config=config, speedup=speedup) or ""
        if _save(storage_of(study), study_id(study), trial_id(t), text):
            changed += 1
    return changed


def _repeats_text(config: StudyConfig) -> str:
    b = config.benchmark
    if b.min_repeats == b.max_repeats:
        return f"{b.max_repeats} repeats"
    each = b.scenario_precision
    if len(objective_of(config).directions()) > 1:
        return f"{b.min_repeats}-{b.max_repeats} repeats, stopping at ±{each:.1%} per scenario or a clear verdict"
    return (
        f"{b.min_repeats}-{b.max_repeats} repeats: {b.min_repeats} of each scenario, then more only while the "
        f"objective is neither clearly behind nor ahead of the last finalist, until ±{b.precision:.2%} on the "
        f"objective (±{each:.1%} per scenario while the study does not know its noise yet)"
    )



def _shown(confirmation: Any, number: int) -> str:
    """A finalist's confirmed value as the confirmation recorded it for people (its objective's units)."""
    shown = (confirmation.get("shown") or {}).get(str(number))
    return str(shown) if shown is not None else f"{confirmation['values'][str(number)]:.1f}"
