"""`tune check` and `tune start` refuse a study whose requests the server cannot hold, in one line with the numbers
(exit 2), before anything starts; here from the launch flags alone (no server answers on the port)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.sim.testing import free_port

STUDY = """
[study]
name = "too-big"
storage = "sqlite:///{tmp}/s.db"

[target]
base_url = "http://127.0.0.1:{port}"
command = {command}

[space.draft_max]
type = "int"
low = 1
high = 8
flag = "--spec-draft-n-max"

[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 300
output_tokens = 64
requests = 2

[[benchmark.scenarios]]
name = "c4-chat"
concurrency = 4
prompt_tokens = {prompt}
output_tokens = 124
requests = 4
"""


def _study(tmp_path: Path, *, prompt: int, extra: list[str]) -> Path:
    port = free_port()
    command = ["llama-server", "-m", "M", "-md", "M", "--spec-type", "draft-simple", "--spec-draft-n-max", "8",
               "--port", str(port), "-c", "2048", *extra]  # fmt: skip
    path = tmp_path / "s.toml"
    path.write_text(STUDY.format(tmp=tmp_path, port=port, command=json.dumps(command), prompt=prompt))
    return path


@pytest.mark.parametrize("verb", [["check"], ["start", "--trials", "1"]])
def test_a_study_past_the_server_s_kv_pool_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: list[str]
) -> None:
    """The issue's study: 372 words, 124 tokens out and drafts of up to 8, four streams over -c 2048's one pool."""
    path = _study(tmp_path, prompt=372, extra=[])
    assert main([*verb, "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "benchmark.scenarios c4-chat" in err and "4 streams x 513 tokens" in err
    assert "= 2052 > the 2048-token KV pool" in err and "-c 2048, 4 slots (no -np" in err
    assert not (tmp_path / "s.db").exists()  # nothing started


def test_a_study_the_server_holds_passes_the_capacity_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _study(tmp_path, prompt=372, extra=["-np", "2"])  # 2 slots of 1024 tokens each
    main(["check", "--config", str(path)])  # other checks may fail here (no llama-server installed): not this one
    out = capsys.readouterr().out
    assert "every scenario fits the server's capacity (-c 2048, 2 slots, each with a KV of its own)" in out
