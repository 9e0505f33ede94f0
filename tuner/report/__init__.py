"""What a study found, in forms to act on: the figures and words every view shows, the dashboard (with
feasibility and the recommendation put back), a Markdown report with plots, and the recommended config exported
as a systemd drop-in, a command line or JSON."""

from tuner.report._dashboard import DashboardServer
from tuner.report._export import choose_trial, export_text, launch_text, secrets_note
from tuner.report._facts import (
    baseline_drift,
    figure_text,
    per_scenario_best,
    recommendation_lines,
    scenario_text,
    speedup_clause,
    study_speedup,
    trial_row,
    tune_command,
    verification_text,
)
from tuner.report._notes import mark_feasibility, study_note_text, trial_note_text, write_study_note
from tuner.report._report import build_report
from tuner.report._slo import closest_slo_lines, slo_object, slo_sentence, slo_state

__all__ = [
    "DashboardServer",
    "baseline_drift",
    "build_report",
    "choose_trial",
    "closest_slo_lines",
    "export_text",
    "figure_text",
    "launch_text",
    "mark_feasibility",
    "per_scenario_best",
    "recommendation_lines",
    "scenario_text",
    "secrets_note",
    "slo_object",
    "slo_sentence",
    "slo_state",
    "speedup_clause",
    "study_note_text",
    "study_speedup",
    "trial_note_text",
    "trial_row",
    "tune_command",
    "verification_text",
    "write_study_note",
]
