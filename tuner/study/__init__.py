"""The study: Optuna storage, the trial's story (its steps, its score and what it is measured against), the tuning
loop and its end-of-study confirmation."""

from tuner.study._budget import UNTIL_DEADLINE, StudyEta, parse_until, study_eta
from tuner.study._console import Console
from tuner.study._dryrun import planned_launches
from tuner.study._faults import storage_faults
from tuner.study._fleet import default_worker_name
from tuner.study._loop import Interrupted, resume_command, run_study
from tuner.study._objective import Evidence, TrialParts
from tuner.study._steps import describe_result
from tuner.study._storage import (
    NoSuchStudy,
    config_from_study,
    load_existing,
    make_storage,
    open_study,
    storage_problem,
)
from tuner.study._warm import read_warm_start
from tuner.study._warmups import describe_warmups

__all__ = [
    "UNTIL_DEADLINE",
    "Console",
    "Evidence",
    "Interrupted",
    "NoSuchStudy",
    "StudyEta",
    "TrialParts",
    "config_from_study",
    "default_worker_name",
    "describe_result",
    "describe_warmups",
    "load_existing",
    "make_storage",
    "open_study",
    "parse_until",
    "planned_launches",
    "read_warm_start",
    "resume_command",
    "run_study",
    "storage_faults",
    "storage_problem",
    "study_eta",
]
