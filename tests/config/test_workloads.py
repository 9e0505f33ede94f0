"""Benchmark workloads: random words, HumanEval coding requests, and chat files (tuner/config/_workloads.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.config import load_chats, parse_config, sample_chat
from tuner.errors import ConfigError
from tuner.sim import workload_kind

STUDY = """
[target]
base_url = "http://127.0.0.1:30000"
command = ["python3", "-m", "sglang.launch_server", "--port", "30000"]

[space.n]
type = "int"
low = 1
high = 4
flag = "--n"
default = 1

[benchmark]
[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 64
output_tokens = 32
requests = 1
prompts = "{prompts}"
"""


def _config(tmp_path: Path, prompts: str):
    return parse_config(STUDY.format(prompts=prompts), source=str(tmp_path / "s.toml"), base_dir=tmp_path)


def test_humaneval_requests_are_coding_requests_drawn_by_seed() -> None:
    chats = load_chats("humaneval")
    assert len(chats) == 164
    a, b = sample_chat("humaneval", seed=5), sample_chat("humaneval", seed=5)
    assert a == b and a[0]["role"] == "user" and "```python" in a[0]["content"]
    assert a[0]["content"].startswith("[r00000005] ")  # unique prefix per request
    assert workload_kind(a[0]["content"]) == "code"
    drawn = {sample_chat("humaneval", seed=s)[0]["content"].split("] ", 1)[1] for s in range(40)}
    assert len(drawn) > 20  # many different problems, not one repeated


def test_chat_files_in_both_sharegpt_shapes(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    rows = [
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"},
                      {"role": "assistant", "content": "Hello!"}]},
        {"conversations": [{"from": "human", "value": "Write a haiku"}, {"from": "gpt", "value": "..."},
                           {"from": "human", "value": "Another one"}, {"from": "gpt", "value": "..."}]},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    cfg = _config(tmp_path, "chats.jsonl")
    assert cfg.benchmark.scenarios[0].prompts == str(path.resolve())
    chats = load_chats(str(path.resolve()))
    # Cut after the last user turn: the server writes the reply.
    assert chats[0] == (("system", "Be brief."), ("user", "Hi there"))
    assert [role for role, _ in chats[1]] == ["user", "assistant", "user"]
    messages = sample_chat(str(path.resolve()), seed=1)
    assert sum(m["content"].startswith("[r") for m in messages) == 1


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json\n", r"\(bad.jsonl line 1: a JSON object per line, got"),
        ('{"text": "hi"}\n', r'\(bad.jsonl line 1: an object with a "messages" or "conversations" list'),
        ('{"messages": [{"role": "robot", "content": "x"}]}\n', r"\(bad.jsonl line 1: turns like"),
        ('{"messages": []}\n\n{"messages": [{"role": "assistant", "content": "x"}]}\n', r"line 1: at least"),
        ("\n", r"\(bad.jsonl: at least one chat\)"),
    ],
)
def test_bad_chat_files_are_config_errors_naming_the_line(tmp_path: Path, content: str, match: str) -> None:
    """One line: the study file, the scenario's prompts key, then the chat file, its line and what was wrong."""
    (tmp_path / "bad.jsonl").write_text(content)
    with pytest.raises(ConfigError, match=r"\]\.prompts: expected a usable file for scenario .*" + match):
        _config(tmp_path, "bad.jsonl")


def test_unknown_workload_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r'prompts: expected "random", "humaneval" or the path of a .jsonl'):
        _config(tmp_path, "sharegpt")
    missing = r"\.prompts: expected a usable file .*\(missing.jsonl: a readable JSONL file"
    with pytest.raises(ConfigError, match=missing):
        _config(tmp_path, "missing.jsonl")
