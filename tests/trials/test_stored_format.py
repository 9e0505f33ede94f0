"""A study written in the stored format of before :class:`~tuner.trials.TrialRecord` (raw Optuna calls, the user
attr keys `tune` has always written) loads and reports the same: ``tune status``, ``tune best`` and ``tune export``
print what they printed before the record existed.

The expected outputs in ``data/stored_format/`` were first recorded by the code before the record existed, from
this very study, and change only where a view deliberately says more (a new figure, new words):
``python tests/trials/test_stored_format.py DIR`` (with the code on ``PYTHONPATH``) writes them again.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path

import optuna
from optuna.distributions import IntDistribution
from optuna.trial import FrozenTrial, TrialState, create_trial

DATA = Path(__file__).resolve().parent / "data" / "stored_format"
NAME = "old"

_CONFIG = """
[study]
name = "old"
storage = "sqlite:///{dir}/old.db"
[target]
command = ["python", "-m", "tuner.sim", "--port", "30999", "--speculative-ddtree-budget", "8"]
base_url = "http://127.0.0.1:30999"
[space.budget]
type = "int"
low = 4
high = 32
flag = "--speculative-ddtree-budget"
[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 16
output_tokens = 16
requests = 1
[[benchmark.scenarios]]
name = "c8"
concurrency = 8
prompt_tokens = 16
output_tokens = 16
requests = 8
"""

COMMANDS = {
    "status.json": ["status", "--json"],
    "status.txt": ["status", "--wide"],
    "best.json": ["best", "--json"],
    "best.txt": ["best"],
    "export.json": ["export", "--format", "json"],
    "export-baseline.txt": ["export", "--trial", "0", "--format", "command"],
}


def _scenario(name: str, tok_s: float, *, hw: float = 2.0, repeats: int = 2) -> dict[str, object]:
    """A scenario's figures under their flat keys, as the loop has always written them."""
    return {
        f"{name}.tok_s": tok_s,
        f"{name}.point": tok_s,
        f"{name}.score": tok_s - hw,
        f"{name}.half_width": hw,
        f"{name}.repeats": [tok_s - 1.0, tok_s + 1.0][:repeats],
        f"{name}.accept_length": 2.5,
        f"{name}.seconds": 4.0,
        f"{name}.stopped": "precise",
        f"{name}.warmup": "none",
        f"{name}.client_bound": False,
        f"{name}.errors": 0,
    }


def _trial(number: int, budget: int, state: TrialState, value: float | None, **user: object) -> FrozenTrial:
    t = create_trial(
        state=state,
        value=value,
        params={"budget": budget},
        distributions={"budget": IntDistribution(4, 32)},
        user_attrs={"command": f"python -m tuner.sim --port 30999 --speculative-ddtree-budget {budget}", **user},
    )
    t.number = number
    return t


def build(directory: Path) -> Path:
    """The study file and an old-format study in ``directory``; the file's path."""
    from tuner.config import parse_config

    path = directory / "old.toml"
    path.write_text(_CONFIG.format(dir=directory))
    config = parse_config(path.read_text(), source=str(path), base_dir=directory)
    study = optuna.create_study(study_name=NAME, storage=config.study.storage, direction="maximize")
    for key, value in {
        "config_fingerprint": config.fingerprint(),
        "config_toml": path.read_text(),
        "config_source": str(path),
        "config_dir": str(directory),
        "target_trials": 8,
        "confirm_top": 3,
        "pruning_saved_s": 12.5,
        "warmups": "warm-ups: none needed",
    }.items():
        study.set_user_attr(key, value)
    gate = {"gate": "2/2", "correct": True, "gate_s": 1.5, "ready_s": 3.0, "benchmark_s": 9.0}
    both = {**_scenario("c1", 100.0), **_scenario("c8", 500.0)}
    trials = [
        _trial(0, 8, TrialState.COMPLETE, 98.0, baseline=True, worker_name="w1", target_fingerprint="gpu A", **gate,
               **both, score={"c1": 98.0, "c8": 498.0}),
        _trial(1, 16, TrialState.COMPLETE, 118.0, seed_trial=0, **gate, **_scenario("c1", 120.0),
               **_scenario("c8", 560.0, hw=5.0), repeats_decided="objective ahead: +3.1% after 2 repeats"),
        _trial(2, 24, TrialState.PRUNED, None, failure_phase="benchmark", failure_reason="pruned after scenario c1: "
               "slower", pruned_skipped_scenarios=["c8"], pruning_saved_s=12.5, **_scenario("c1", 60.0)),
        _trial(3, 32, TrialState.PRUNED, None, failure_phase="ready", failure_reason="server died: out of memory",
               log_tail="Load weight end.\ntorch.OutOfMemoryError: CUDA out of memory"),
        _trial(4, 12, TrialState.COMPLETE, 130.0, gate="1/2", correct=False, **_scenario("c1", 132.0),
               **_scenario("c8", 600.0)),
        _trial(5, 4, TrialState.PRUNED, None, rejected=True, failure_phase="sample",
               failure_reason="violates budget <= 30"),
        _trial(6, 16, TrialState.PRUNED, None, duplicate_of=1, failure_phase="sample",
               failure_reason="same config as trial #1"),
        _trial(7, 20, TrialState.FAIL, None, interrupted="Ctrl-C or SIGTERM", branch={"budget": 20}),
        _trial(8, 28, TrialState.FAIL, None, failure_phase="host", failure_kind="environment",
               failure_reason="ssh: connection dropped"),
    ]  # fmt: skip
    for t in trials:
        study.add_trial(t)
    return path


def run(path: Path) -> dict[str, str]:
    """What each command of :data:`COMMANDS` prints for the study at ``path`` (its directory shown as ``<dir>``)."""
    from tuner.cli import main

    out = {}
    for name, argv in COMMANDS.items():
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main([*argv, "--config", str(path)])
        text = buf.getvalue().replace(str(path.parent), "<dir>").replace(os.path.relpath(path.parent), "<dir>")
        out[name] = f"rc {rc}\n" + re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?", "<time>", text)
    return out


def test_an_old_format_study_reports_as_before(tmp_path: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    got = run(build(tmp_path))
    for name, text in got.items():
        assert text == (DATA / name).read_text(), name
    rows = json.loads(got["status.json"].split("\n", 1)[1])
    assert [r["outcome"] for r in rows][:5] == [
        "feasible", "feasible", "pruned (slower)", "failed to start", "infeasible (wrong answers)"
    ]  # fmt: skip


def test_the_record_reads_what_the_old_keys_say(tmp_path: Path) -> None:
    from tuner.trials import record_of, study_record

    build(tmp_path)
    study = optuna.load_study(study_name=NAME, storage=f"sqlite:///{tmp_path}/old.db")
    base, seeded, slower, died, wrong, rejected, repeat, stopped, world = (record_of(t) for t in study.trials)
    assert base.is_baseline and base.gate == "2/2" and base.correct is True and base.worker_name == "w1"
    assert base.figure("c8", "tok_s") == 500.0 and base.repeats("c1") == [99.0, 101.0] and base.score == {
        "c1": 98.0, "c8": 498.0
    }  # fmt: skip
    assert seeded.seed == 0 and seeded.warm_origin is None and not seeded.is_baseline
    assert seeded.repeats_decided == "objective ahead: +3.1% after 2 repeats"
    assert slower.pruned_skipped == ("c8",) and slower.outcome == "pruned (slower)" and slower.counted
    assert died.failure_phase == "ready" and "OutOfMemoryError" in (died.log_tail or "")
    assert wrong.correct is False and not wrong.feasible and wrong.outcome_text.startswith("infeasible")
    assert rejected.rejected and not rejected.counted and repeat.duplicate_of == 1 and not repeat.counted
    assert stopped.interrupted == "Ctrl-C or SIGTERM" and stopped.branch == {"budget": 20}
    assert world.failure_kind == "environment" and world.retry(baseline=True) == {"retry_of": 8}
    facts = study_record(study)
    assert (facts.target_trials, facts.confirm_top, facts.pruning_saved_s) == (8, 3, 12.5)
    assert facts.config_dir == str(tmp_path) and facts.warm_start is None and facts.confirmation is None


if __name__ == "__main__":  # record the expected outputs with the code on PYTHONPATH
    import tempfile

    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as d:
        for name, text in run(build(Path(d))).items():
            (target / name).write_text(text)
