"""The server dialect as the study file sees it: [target] server, readiness defaults, bool style, lint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.config import base_spec, load_config, parse_config
from tuner.dialects import LlamaCppDialect, LlamaServerDialect, SGLangDialect, VLLMDialect
from tuner.errors import ConfigError
from tuner.space import render
from tuner.target._preflight import dialect_findings

ROOT = Path(__file__).resolve().parents[2]

LLAMA = """
[target]
base_url = "http://127.0.0.1:8000"
command = ["python3", "-m", "llama_cpp.server", "--model", "m.gguf", "--flash_attn", "false",
           "--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", "4"]
{target_extra}

[space.n]
type = "int"
low = 1
high = 8
flag = "--draft_model_num_pred_tokens"

[space.flash]
type = "bool"
flag = "--flash_attn"

[benchmark]
[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 16
output_tokens = 16
requests = 1
{extra}
"""


def _load(tmp_path: Path, *, extra: str = "", target_extra: str = "") -> object:
    text = LLAMA.format(extra=extra, target_extra=target_extra)
    return parse_config(text, source=str(tmp_path / "s.toml"), base_dir=tmp_path)


def test_llama_cpp_is_detected_and_sets_readiness_and_bool_style(tmp_path: Path) -> None:
    cfg = _load(tmp_path)
    assert isinstance(cfg.dialect, LlamaCppDialect)  # type: ignore[attr-defined]
    assert cfg.readiness.health_path is None and cfg.readiness.generation_check  # type: ignore[attr-defined]
    assert cfg.readiness.phase_markers == LlamaCppDialect.phase_markers  # type: ignore[attr-defined]
    assert r"error: argument" in cfg.readiness.fatal_patterns  # type: ignore[attr-defined]
    assert cfg.baseline == {"n": 4, "flash": False}  # type: ignore[attr-defined]
    spec = render(cfg.space, base_spec(cfg.target), {"n": 6, "flash": True})  # type: ignore[attr-defined]
    assert spec.argv[-4:] == ("--draft_model_num_pred_tokens", "6", "--flash_attn", "true")
    assert spec.argv.count("--flash_attn") == 1


def test_study_file_readiness_settings_win_over_the_dialect(tmp_path: Path) -> None:
    cfg = _load(tmp_path, extra='[readiness]\nhealth_path = "/v1/models"\nphase_markers = { up = "Uvicorn" }\n')
    assert cfg.readiness.health_path == "/v1/models"  # type: ignore[attr-defined]
    assert cfg.readiness.phase_markers == (("up", "Uvicorn"),)  # type: ignore[attr-defined]


def test_no_health_and_no_generation_check_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"readiness.generation_check: expected true: without a health path"):
        _load(tmp_path, extra="[readiness]\ngeneration_check = false\n")


def test_explicit_server_overrides_detection(tmp_path: Path) -> None:
    cfg = _load(tmp_path, target_extra='server = "generic"')
    assert cfg.dialect.name == "generic" and cfg.dialect.reason == "[target] server"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"target.server: expected one of 'auto'"):
        _load(tmp_path, target_extra='server = "tgi"')


def test_the_simulator_counts_as_sglang() -> None:
    cfg = load_config(ROOT / "studies" / "demo.toml")
    assert isinstance(cfg.dialect, SGLangDialect) and "tuner.sim" in cfg.dialect.reason
    assert cfg.readiness.health_path == "/health"


def test_vllm_eagle_study_validates_against_the_vllm_dialect() -> None:
    """`tune check`'s dialect items for the shipped vLLM study, without connecting to its placeholder host."""
    cfg = load_config(ROOT / "studies" / "vllm-eagle.toml")
    assert isinstance(cfg.dialect, VLLMDialect)
    findings = list(dialect_findings(cfg))  # no host, no connection: the config alone
    assert [f for f in findings if f.ok is False] == []
    assert findings[0].text == "server dialect: vllm ([target] server)" and findings[0].ok
    assert cfg.baseline["num_speculative_tokens"] == 3 and cfg.baseline["prefix_caching"] is True


def test_lint_names_a_misspelt_json_key_and_wrong_flag_spelling(tmp_path: Path) -> None:
    text = (ROOT / "studies" / "vllm-eagle.toml").read_text()
    text = text.replace('key = "num_speculative_tokens"', 'key = "num_spec_tokens"\ndefault = 3')
    text = text.replace('flag = "--max-num-seqs"', 'flag = "--max_num_seqs"')
    text = text.replace('"--max-num-seqs", "64",', '"--max_num_seqs", "64",')
    cfg = parse_config(text, source="v.toml", base_dir=tmp_path)
    lines = [f.text for f in dialect_findings(cfg) if f.ok is False]
    assert len(lines) == 2, lines
    assert any("key 'num_spec_tokens': not a --speculative-config key" in line for line in lines)
    assert any("--max_num_seqs: vllm flags join words with '-'" in line for line in lines)


def test_llama_server_study_validates_and_a_removed_flag_is_named(tmp_path: Path) -> None:
    """The shipped llama-server study passes `tune check`'s dialect items; the old --draft-max is caught there,
    before a start that would exit with "the argument has been removed"."""
    cfg = load_config(ROOT / "studies" / "llama-server.toml")
    assert isinstance(cfg.dialect, LlamaServerDialect) and cfg.readiness.health_path == "/health"
    assert [f.text for f in dialect_findings(cfg) if f.ok is not True] == [
        "missing: no cache flush: repeats may reuse the prefix cache (prompts are unique per request)"
    ]
    assert cfg.baseline == {"spec_type": "draft-simple", "draft_max": 16, "draft_min": 1, "draft_p_min": 0.0}
    off = render(cfg.space, base_spec(cfg.target), {"spec_type": "none"}).argv  # no speculation: its flags all gone
    assert not {"--spec-type", "--spec-draft-n-max", "--spec-draft-n-min"} & set(off) and "--metrics" in off
    text = (ROOT / "studies" / "llama-server.toml").read_text()
    text = text.replace('"--spec-draft-n-min", "1"', '"--draft-min", "1"')
    findings = [(f.ok, f.text) for f in dialect_findings(parse_config(text, source="old.toml", base_dir=tmp_path))]
    assert [f for f in findings if f[0] is False] == [
        (False, "[target] command: --draft-min: llama-server removed it (it exits at start); use --spec-draft-n-min")
    ]
