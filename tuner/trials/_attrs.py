"""Names of the user attrs every trial carries: the contract between the loop, `tune status`, the report and
the dashboard. Per-scenario figures are flat keys (``c1-short.tok_s``) so the dashboard shows them as columns;
which figures exist is the metric registry's business (:mod:`tuner.metrics`).
"""

from __future__ import annotations

BASELINE = "baseline"
COMMAND = "command"
ENV = "env"
FAILURE_PHASE = "failure_phase"
FAILURE_REASON = "failure_reason"
LOG_TAIL = "log_tail"
EVIDENCE = "evidence"
READY_S = "ready_s"
PHASE_TIMES = "phase_times"
BENCHMARK_S = "benchmark_s"
GATE_S = "gate_s"
CORRECT = "correct"
GATE = "gate"
GATE_SKIPPED = "gate_skipped"
"""True on a COMPLETE trial whose gate did not run (``[gate] when = "contenders"``: too far behind the best)."""
GATE_DEFERRED = "gate_deferred"
"""True on a COMPLETE trial of a ``[gate] when = "final"`` study: gated at the end if it is a finalist, its
verdict then recorded in the study (:mod:`tuner.trials._verdicts`)."""
NOT_FINALIST = "not_finalist"
"""True on the copies :func:`tuner.trials.study_trials` hands out of a deferred trial the end-of-study gate passed
over (not a finalist); never stored."""
REJECTED = "rejected"
DUPLICATE_OF = "duplicate_of"
RETRY_OF = "retry_of"
INTERRUPTED = "interrupted"
WORKER = "worker"
HEARTBEAT = "heartbeat"
WORKER_NAME = "worker_name"
SLOT = "slot"
TARGET_FINGERPRINT = "target_fingerprint"
SCORE = "score"
SEED = "seed_trial"
"""The expert seed's index in ``[search] seed_trials``, or ``study#n``: a top config of the warm start's study."""
BRANCH = "branch"
PRUNED_SKIPPED = "pruned_skipped_scenarios"
PRUNING_SAVED_S = "pruning_saved_s"
WARMUPS = "warmups"
"""Study attr: what ``[benchmark] warmup = "auto"`` concluded per scenario when the study last stopped."""
TARGET_TRIALS = "target_trials"
WARM_START = "warm_start"
"""Study attr: what the warm start carried over from another study (:class:`tuner.trials.WarmStart`)."""
CONFIRM_TOP = "confirm_top"
"""Study attr: the study's ``[search] confirm_top`` (how many top configs its end re-measures), for readers that
have the study but not its file (the dashboard's notes)."""
STEPS = "steps"
#: What decided the repeats beyond the first pass on the whole objective (tuner.stats.decide_objective).
REPEATS_DECIDED = "repeats_decided"
"""The scenario measured at each intermediate step (``steps[i]`` for step ``i``)."""
FAILURE_KIND = "failure_kind"
"""``config`` or ``environment`` (the world's fault, not the config's), when a part of `tune` tells."""
MAX_RATE = "max_rate_rps"
"""``[objective] kind = "max_rate"``: the highest offered rate (requests/s) at which the trial kept the SLO."""
MAX_RATE_BRACKET = "max_rate_bracket"
PROBES = "probes"
"""Passes of an open-loop scenario at rates other than its own (a rate search's), each with its verdict and p99s."""
"""``[highest met, lowest missed]`` of the rate search (either None when no step met, or missed, it)."""
EMULATED = "emulated"
"""A batch cap played by the client (``[search] emulate``): the parameter and its flag, the value the server
started with (``server``), the one the trial chose (``chosen``, also its param) and each cap tried (``caps``: its
value, whether its SLO held, its constraint and its passes' probe figures)."""
SLO_MISSED = "slo_missed"
"""Why a COMPLETE trial is infeasible under ``[slo]``: one line per scenario that confidently missed it
(its ``slo`` constraint is then > 0)."""
CLIENT_BOUND = "client_bound"
"""Per scenario (``<scenario>.client_bound``, a :mod:`tuner.metrics` key): the load generator was the bottleneck."""


def scenario_key(scenario: str, key: str) -> str:
    """``<scenario>.<key>``: a per-scenario figure's user attr (the keys are in :mod:`tuner.metrics`)."""
    return f"{scenario}.{key}"

DASHBOARD_FEASIBLE = "feasible"
"""The dashboard's own column: ``yes`` or why not (the dashboard ignores Optuna's constraints)."""
STUDY_FINGERPRINT = "config_fingerprint"
"""Study attr: the study file's fingerprint; a resumed study must still match it."""
CONFIG_TEXT = "config_toml"
"""Study attr: the study file's text, secrets redacted (``config_from_study`` restores the config from it)."""
CONFIG_SOURCE = "config_source"
CONFIG_DIR = "config_dir"
