"""What a study found, in forms to act on: the figures and words every view shows, the dashboard (with
feasibility and the recommendation put back), a Markdown report with plots, and the recommended config exported
as a systemd drop-in, a command line or JSON."""

from tuner.report._dashboard import DashboardServer, dashboard_app, refresh_notes, serve_dashboard
from tuner.report._export import (
    FORMATS,
    choose_trial,
    export_dropin,
    export_json,
    export_text,
    launch_text,
    secrets_note,
)
from tuner.report._facts import (
    FailureGroup,
    Figure,
    ScenarioComparison,
    Speedup,
    baseline_trial,
    compare_scenarios,
    failure_groups,
    figure_text,
    params_text,
    per_scenario_best,
    recommendation_lines,
    scenario_figure,
    scenario_text,
    speedup_over_baseline,
    trial_figure,
    trial_row,
    tune_command,
    verification_text,
)
from tuner.report._importance import MIN_IMPORTANCE_TRIALS, importances
from tuner.report._notes import (
    annotate_trials,
    mark_feasibility,
    study_note_text,
    trial_note_text,
    write_study_note,
)
from tuner.report._report import Report, build_report

__all__ = [
    "FORMATS",
    "MIN_IMPORTANCE_TRIALS",
    "DashboardServer",
    "FailureGroup",
    "Figure",
    "Report",
    "ScenarioComparison",
    "Speedup",
    "annotate_trials",
    "baseline_trial",
    "build_report",
    "choose_trial",
    "compare_scenarios",
    "dashboard_app",
    "export_dropin",
    "export_json",
    "export_text",
    "failure_groups",
    "figure_text",
    "importances",
    "launch_text",
    "mark_feasibility",
    "params_text",
    "per_scenario_best",
    "recommendation_lines",
    "refresh_notes",
    "scenario_figure",
    "scenario_text",
    "secrets_note",
    "serve_dashboard",
    "speedup_over_baseline",
    "study_note_text",
    "trial_figure",
    "trial_note_text",
    "trial_row",
    "tune_command",
    "verification_text",
    "write_study_note",
]
