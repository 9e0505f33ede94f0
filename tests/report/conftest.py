from __future__ import annotations

import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_study import study_toml

from tuner.config import StudyConfig, load_config
from tuner.sim.testing import free_port
from tuner.study import Evidence, make_storage, open_study, run_study
from tuner.trials import write


def write_config(directory: Path, *, name: str, port: int) -> StudyConfig:
    path = directory / f"{name}.toml"
    path.write_text(study_toml(name=name, port=port, gate=False))
    return load_config(path)


@pytest.fixture(autouse=True)
def _quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


@dataclass(frozen=True, kw_only=True)
class StudyCase:
    config: StudyConfig
    study: optuna.Study

    @property
    def storage(self) -> str:
        return self.config.study.storage


@pytest.fixture(scope="session")
def sim_study() -> Iterator[StudyCase]:
    """A REAL study: the tuning loop ran 6 trials against the simulated server."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="tune-report-sim-") as tmp:
        config = write_config(Path(tmp), name="sim", port=free_port())
        run_study(config, trials=6)
        study = optuna.load_study(study_name="sim", storage=make_storage(config.study.storage))
        yield StudyCase(config=config, study=study)


def _scenario_attrs(tok_s: float, *, accept: float) -> dict[str, object]:
    repeats = [round(tok_s * 0.99, 2), round(tok_s * 1.01, 2)]
    return {
        "c2.tok_s": tok_s,
        "c2.per_stream_tok_s": tok_s / 2,
        "c2.ttft_p50_s": 0.04,
        "c2.ttft_p99_s": 0.05,
        "c2.itl_p50_s": 0.006,
        "c2.itl_p99_s": 0.012,
        "c2.accept_length": accept,
        "c2.errors": 0,
        "c2.ci_low": repeats[0],
        "c2.ci_high": repeats[1],
        "c2.repeats": repeats,
        "c2.seconds": 1.5,
        # As the benchmark records them: the score (told as the objective) is the interval's lower end.
        "c2.point": tok_s,
        "c2.score": round(tok_s * 0.98, 4),
        "c2.half_width": round((tok_s / 0.98 - tok_s * 0.98) / 2, 4),
    }


# (params, outcome, tok/s): outcome is "ok", "wrong" (gate 1/2: infeasible), or a failure phase.
SYNTHETIC = [
    (
        {
            "algorithm": "DDTREE",
            "budget": 12,
            "topk": 6,
            "block_size": 8,
            "draft_window": 2048,
            "mem_fraction_static": 0.85,
        },
        "ok",
        100.0,
    ),
    (
        {
            "algorithm": "DDTREE",
            "budget": 16,
            "topk": 4,
            "block_size": 8,
            "draft_window": 2048,
            "mem_fraction_static": 0.85,
        },
        "ok",
        120.0,
    ),
    (
        {
            "algorithm": "DDTREE",
            "budget": 8,
            "topk": 8,
            "block_size": 4,
            "draft_window": 2048,
            "mem_fraction_static": 0.88,
        },
        "ok",
        111.0,
    ),
    (
        {
            "algorithm": "DDTREE",
            "budget": 24,
            "topk": 10,
            "block_size": 16,
            "draft_window": 2048,
            "mem_fraction_static": 0.90,
        },
        "wrong",
        190.0,
    ),
    (
        {
            "algorithm": "DDTREE",
            "budget": 32,
            "topk": 10,
            "block_size": 16,
            "draft_window": 2048,
            "mem_fraction_static": 0.92,
        },
        "ready",
        0.0,
    ),
    ({"algorithm": "DFLASH", "block_size": 8, "draft_window": 2048, "mem_fraction_static": 0.82}, "ok", 131.0),
    ({"algorithm": "DFLASH", "block_size": 16, "draft_window": 2048, "mem_fraction_static": 0.80}, "ok", 104.0),
    (
        {
            "algorithm": "DDTREE",
            "budget": 4,
            "topk": 2,
            "block_size": 4,
            "draft_window": "none",
            "mem_fraction_static": 0.86,
        },
        "ok",
        93.0,
    ),
    (
        {
            "algorithm": "DDTREE",
            "budget": 20,
            "topk": 5,
            "block_size": 8,
            "draft_window": 2048,
            "mem_fraction_static": 0.87,
        },
        "ok",
        126.0,
    ),
    (
        {
            "algorithm": "DDTREE",
            "budget": 28,
            "topk": 3,
            "block_size": 16,
            "draft_window": 2048,
            "mem_fraction_static": 0.91,
        },
        "benchmark",
        0.0,
    ),
]


@pytest.fixture
def synthetic_study(tmp_path: Path) -> StudyCase:
    """A study written with ask/tell exactly as the loop records trials, including an infeasible trial that is
    the fastest of all (the dashboard would call it best) and two failures with evidence."""
    config = write_config(tmp_path, name="syn", port=free_port())
    study = open_study(config)
    evidence = Evidence(artifacts_dir=config.study.artifacts_dir)
    dists = {
        "algorithm": optuna.distributions.CategoricalDistribution(["DDTREE", "DFLASH"]),
        "budget": optuna.distributions.IntDistribution(4, 32, step=4),
        "topk": optuna.distributions.IntDistribution(1, 10),
        "block_size": optuna.distributions.CategoricalDistribution([4, 8, 16]),
        "draft_window": optuna.distributions.CategoricalDistribution(["none", 8, 2048]),
        "mem_fraction_static": optuna.distributions.FloatDistribution(0.80, 0.92, step=0.01),
    }
    for i, (params, outcome, tok_s) in enumerate(SYNTHETIC):
        study.enqueue_trial(params)  # ask() then takes exactly these values
        trial = study.ask({k: dists[k] for k in params})
        assert trial.params == params
        if i == 0:
            write(trial, is_baseline=True)
        write(trial, command=f"python -m tuner.sim trial {i}")
        if outcome in ("ok", "wrong"):
            for k, v in _scenario_attrs(tok_s, accept=3.5 + i / 10).items():
                trial.set_user_attr(k, v)
            passed = 1 if outcome == "wrong" else 2
            write(trial, gate=f"{passed}/2")
            write(trial, correct=passed == 2)
            trial.set_constraint("correctness", float(2 - passed))
            evidence.attach_json(trial, "benchmark.json", {"scenarios": [{"name": "c2", "output_tok_s": tok_s}]})
            study.tell(trial, [tok_s * 0.98])
        else:
            reason = (
                "server logged a fatal error while capturing cuda graphs: torch.OutOfMemoryError: CUDA out of "
                "memory. Tried to allocate 1.56 GiB."
                if outcome == "ready"
                else "died under load in scenario c2: 2/2 requests failed"
            )
            write(trial, failure_phase=outcome)
            write(trial, failure_reason=reason)
            write(trial, log_tail="Load weight end.\ntorch.OutOfMemoryError: CUDA out of memory")
            evidence.attach(trial, "server-log.txt", "Load weight end.\ntorch.OutOfMemoryError")
            study.tell(trial, state=TrialState.PRUNED)
    return StudyCase(config=config, study=study)
