"""``[slo]`` in a study file: the limits, the attainment, and a scenario's own override."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.config import Slo, load_config
from tuner.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
DEMO = (ROOT / "studies" / "demo.toml").read_text()
C32 = 'name = "c32-long"\nconcurrency = 32\nprompt_tokens = 1024\noutput_tokens = 16\nrequests = 32\n'


def study(tmp_path: Path, slo: str, scenario_slo: str = "") -> Path:
    path = tmp_path / "study.toml"
    text = DEMO.replace(C32, C32 + scenario_slo, 1).replace("[objective]", slo + "\n[objective]", 1)
    path.write_text(text)
    return path


def test_every_scenario_gets_the_slo_and_one_overrides_it(tmp_path: Path) -> None:
    override = "\n[benchmark.scenarios.slo]\nttft_s = 2.5\nattainment = 0.9\n"
    cfg = load_config(study(tmp_path, "[slo]\nttft_s = 1\ntpot_s = 0.04\n", override))
    assert cfg.slo == Slo(ttft_s=1.0, tpot_s=0.04)
    first, _, last = cfg.benchmark.scenarios
    assert first.slo == cfg.slo
    assert last.slo == Slo(ttft_s=2.5, tpot_s=0.04, attainment=0.9)
    assert cfg.slo.describe() == "TTFT 1 s / TPOT 40 ms"
    assert cfg.fingerprint() != load_config(ROOT / "studies" / "demo.toml").fingerprint()  # a different promise


def test_a_request_meets_the_slo_when_it_meets_every_limit() -> None:
    slo = Slo(ttft_s=1.0, tpot_s=0.04)
    assert slo.met(ttft_s=0.9, tpot_s=0.04, e2e_s=100.0)  # no e2e limit
    assert not slo.met(ttft_s=1.1, tpot_s=0.01, e2e_s=1.0)
    assert slo.met(ttft_s=0.5, tpot_s=None, e2e_s=0.5)  # a one-token answer has no TPOT to miss


@pytest.mark.parametrize(
    ("slo", "key", "expected"),
    [
        ("[slo]\nattainment = 0.9\n", "slo", "at least one limit"),
        ("[slo]\nttft_s = 0\n", "slo.ttft_s", "> 0"),
        ("[slo]\nttft_s = 1\nattainment = 1.5\n", "slo.attainment", "(0, 1]"),
        ("[slo]\nttft = 1\n", "slo.ttft", "a known key"),
    ],
)
def test_slo_errors_name_file_key_and_expectation(tmp_path: Path, slo: str, key: str, expected: str) -> None:
    path = study(tmp_path, slo)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == key and expected in info.value.expected and str(path) in str(info.value)


def _objective(path: Path, lines: str) -> Path:
    path.write_text(path.read_text().replace('kind = "geomean"\nmetric = "output_tok_s"\n', lines + "\n", 1))
    return path


def test_goodput_objective_scores_requests_or_tokens_that_met_the_slo(tmp_path: Path) -> None:
    cfg = load_config(_objective(study(tmp_path, "[slo]\nttft_s = 1\n"), "kind = 'goodput'"))
    assert (cfg.objective.kind, cfg.objective.metric) == ("goodput", "goodput_rps")
    path = _objective(study(tmp_path, "[slo]\nttft_s = 1\n"), "kind = 'goodput'\nmetric = 'output_tok_s'")
    assert load_config(path).objective.metric == "goodput_tok_s"


@pytest.mark.parametrize(
    ("slo", "objective", "key", "expected"),
    [
        ("", "kind = 'goodput'", "objective.kind", "an [slo] section"),
        ("[slo]\nttft_s = 1\n", "kind = 'goodput'\nmetric = 'per_stream_tok_s'", "objective.metric", "rps"),
        ("[slo]\nttft_s = 1\n", "kind = 'goodput'\nobjectives = ['c1-short']", "objective.objectives", "known key"),
    ],
)
def test_goodput_errors_name_file_key_and_expectation(
    tmp_path: Path, slo: str, objective: str, key: str, expected: str
) -> None:
    path = _objective(study(tmp_path, slo), objective)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == key and expected in info.value.expected and str(path) in str(info.value)
