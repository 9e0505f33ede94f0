"""`tune init -- COMMAND`: a commented study file that loads, for every dialect with tunable flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.config import load_config

SGLANG = [
    "env", "SGLANG_DDTREE_MAX_TOPK=8", "python3", "-m", "sglang.launch_server", "--model-path", "/m",
    "--host", "0.0.0.0", "--port", "30001", "--speculative-algorithm", "DDTREE",
    "--speculative-ddtree-budget", "48", "--speculative-dflash-block-size", "10",
    "--speculative-dflash-draft-window-size", "2048",
]  # fmt: skip
VLLM = [
    "vllm", "serve", "m", "--port", "8100", "--speculative-config",
    json.dumps({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}),
]  # fmt: skip
LLAMA = [
    "python3", "-m", "llama_cpp.server", "--model", "m.gguf", "--port", "8200",
    "--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", "6",
]  # fmt: skip


def _init(tmp_path: Path, argv: list[str], *extra: str) -> Path:
    out = tmp_path / "new.toml"
    assert main(["init", "--out", str(out), *extra, "--", *argv]) == 0
    return out


def test_sglang_ddtree_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = load_config(_init(tmp_path, SGLANG))
    assert config.dialect.name == "sglang" and config.target.base_url == "http://127.0.0.1:30001"
    assert config.target.env == {"SGLANG_DDTREE_MAX_TOPK": "8"} and config.target.command[0] == "python3"
    # Ranges are widened to hold the command's own values (48 > 32; block 10 is off the step-4 grid).
    assert config.baseline == {"budget": 48, "topk": 8, "block_size": 10, "window": 2048}
    assert config.space.by_name("block_size").step is None
    assert "wrote" in capsys.readouterr().out


def test_vllm_speculative_config(tmp_path: Path) -> None:
    config = load_config(_init(tmp_path, VLLM))
    assert config.dialect.name == "vllm" and config.target.base_url == "http://127.0.0.1:8100"
    p = config.space.by_name("num_speculative_tokens")
    assert (p.json_flag, p.key) == ("--speculative-config", "num_speculative_tokens")
    assert config.baseline == {"num_speculative_tokens": 5}
    assert config.dialect.lint(config.space) == []
    # num_speculative_tokens 1-8 is 8 configs: the study asks for all of them, not for 20.
    assert config.study.trials == 8


def test_a_large_space_gets_the_default_trials(tmp_path: Path) -> None:
    assert load_config(_init(tmp_path, SGLANG)).study.trials == 20


def test_llama_cpp_prompt_lookup(tmp_path: Path) -> None:
    path = _init(tmp_path, LLAMA)
    text = path.read_text()
    assert "# server dialect: llama.cpp" in text and "# missing: no health endpoint" in text
    config = load_config(path)
    assert config.baseline == {"num_pred_tokens": 6}
    assert config.readiness.health_path is None
    assert [s.concurrency for s in config.benchmark.scenarios] == [1, 1]
    assert config.benchmark.scenarios[0].prompts == "humaneval"


def test_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine.toml"
    out.write_text("keep me")
    assert main(["init", "--out", str(out), "--", *LLAMA]) == 1
    assert out.read_text() == "keep me"
    assert "exists: tune init never overwrites" in capsys.readouterr().err


def test_nothing_to_tune_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # llama.cpp without a draft model: num_pred_tokens would do nothing, so nothing is suggested.
    assert main(["init", "--out", str(tmp_path / "x.toml"), "--", *LLAMA[:6]]) == 2
    err = capsys.readouterr().err
    assert "speculative-decoding flag the llama.cpp dialect knows how to tune" in err
    assert not (tmp_path / "x.toml").exists()
    assert main(["init", "--out", str(tmp_path / "x.toml")]) == 2
    assert "a launch command after --" in capsys.readouterr().err
