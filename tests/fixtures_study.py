"""A small, fast study file against the simulator, shared by the loop, report and dashboard tests."""

from __future__ import annotations

import contextlib
import sqlite3
import sys

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.study import NoSuchStudy, make_storage

# One scenario, time-scaled pacing, a 2-problem gate (optional): a trial takes about a second.
TEMPLATE = """
[study]
name = "{name}"
trials = 4
seed = 3
on_exit = "{on_exit}"

[target]
command = [
  "{python}", "-u", "-m", "tuner.sim", "--host", "127.0.0.1", "--port", "{port}",
  "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12",
  "--speculative-dflash-block-size", "8", "--speculative-dflash-draft-window-size", "2048",
  "--max-running-requests", "64", "--mem-fraction-static", "0.85",
  "--sim-load-time", "0.2", "--sim-time-scale", "10", "--sim-seed", "5", "--model-path", "/models/Kimi-K2.6",
]
env = {{ SGLANG_DDTREE_MAX_TOPK = "6" }}
base_url = "http://127.0.0.1:{port}"
stop_grace_s = 5

[readiness]
timeout_s = 30
poll_interval_s = 0.05
progress = false

[space.algorithm]
type = "categorical"
choices = ["DDTREE", "DFLASH"]
flag = "--speculative-algorithm"

[space.budget]
type = "int"
low = 4
high = 32
step = 4
flag = "--speculative-ddtree-budget"
when = {{ algorithm = "DDTREE" }}

[space.topk]
type = "int"
low = 1
high = 10
env = "SGLANG_DDTREE_MAX_TOPK"
when = {{ algorithm = "DDTREE" }}

[space.block_size]
type = "categorical"
choices = [4, 8, 16]
flag = "--speculative-dflash-block-size"

[space.draft_window]
type = "categorical"
choices = ["none", 8, 2048]
absent = "none"
flag = "--speculative-dflash-draft-window-size"

[space.max_running_requests]
type = "categorical"
choices = [16, 64, 128]
flag = "--max-running-requests"

[space.mem_fraction_static]
type = "categorical"
choices = [0.85, 0.92]
flag = "--mem-fraction-static"

[[constraints]]
left = "draft_window"
op = ">="
right = "block_size"

[search]
n_startup_trials = 3
{search}

[benchmark]
warmup_requests = 1
repeats = 2

[[benchmark.scenarios]]
name = "c2"
concurrency = 2
prompt_tokens = 64
output_tokens = 32
requests = 4

[gate]
enabled = {gate}
tasks = ["HumanEval/0", "HumanEval/2"]
min_passed = 2
max_tokens = 1024
"""


def study_toml(*, name: str, port: int, on_exit: str = "stop", search: str = "", gate: bool = True) -> str:
    return TEMPLATE.format(
        name=name, on_exit=on_exit, port=port, python=sys.executable, search=search, gate=str(gate).lower()
    )


def running_trials(storage: str, *, with_attr: str | None = None) -> list[int]:
    """Numbers of RUNNING trials, read straight from the SQLite file.

    Tests poll a study that a tune process is creating; this opens the file read-only and asks the tables, so the
    poll never takes part in creating the schema (``running_study_trials`` is the twin for any backend, through
    make_storage's retries).
    """
    path = storage.removeprefix("sqlite:///")
    query = "SELECT t.number FROM trials t WHERE t.state = 'RUNNING'"
    if with_attr is not None:
        query += " AND EXISTS (SELECT 1 FROM trial_user_attributes a WHERE a.trial_id = t.trial_id AND a.key = ?)"
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as conn:
            rows = conn.execute(query, (with_attr,) if with_attr else ()).fetchall()
    except sqlite3.Error:
        return []  # no file or no schema yet
    return sorted(r[0] for r in rows)


_stores: dict[str, optuna.storages.BaseStorage] = {}


def running_study_trials(storage: str, study_name: str) -> list[FrozenTrial]:
    """RUNNING trials of a study that tune processes may still be creating ([] until it exists), any backend.

    Through make_storage, never a bare URL: the test process races the workers to create Optuna's schema on a
    fresh database, and make_storage retries the loser of that race (a bare URL fails on the duplicate alembic
    row). The storage is kept once made, so polling does not build an engine per look.
    """
    try:
        store = _stores.get(storage) or _stores.setdefault(storage, make_storage(storage, create=False))
        study = optuna.load_study(study_name=study_name, storage=store)
    except (NoSuchStudy, KeyError):
        return []  # no database file or no study in it yet
    return study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
