"""What a study found, in forms to act on: the dashboard (with feasibility marked), a Markdown report with
plots, and the best config exported as a systemd drop-in, a command line or JSON."""

from tuner.report._dashboard import DashboardServer, dashboard_app, refresh_notes, serve_dashboard
from tuner.report._export import FORMATS, choose_trial, export_dropin, export_json, export_text, launch_spec
from tuner.report._facts import (
    FailureGroup,
    ScenarioComparison,
    baseline_trial,
    best_feasible,
    compare_scenarios,
    failure_groups,
    feasibility_label,
    infeasibility,
    rank_value,
    ranked_feasible,
    ratio_ci,
)
from tuner.report._notes import (
    FEASIBLE_ATTR,
    NOTE_MARKER,
    annotate_trials,
    mark_feasibility,
    study_note_text,
    trial_note_text,
    write_study_note,
)
from tuner.report._report import MIN_IMPORTANCE_TRIALS, Report, build_report, importances

__all__ = [
    "FEASIBLE_ATTR",
    "FORMATS",
    "MIN_IMPORTANCE_TRIALS",
    "NOTE_MARKER",
    "DashboardServer",
    "FailureGroup",
    "Report",
    "ScenarioComparison",
    "annotate_trials",
    "baseline_trial",
    "best_feasible",
    "build_report",
    "choose_trial",
    "compare_scenarios",
    "dashboard_app",
    "export_dropin",
    "export_json",
    "export_text",
    "failure_groups",
    "feasibility_label",
    "importances",
    "infeasibility",
    "launch_spec",
    "mark_feasibility",
    "rank_value",
    "ranked_feasible",
    "ratio_ci",
    "refresh_notes",
    "serve_dashboard",
    "study_note_text",
    "trial_note_text",
    "write_study_note",
]
