"""`tune check` / `tune start` on an SGLang command: the version, its flag table, and `--help`.

The server is tests/fixtures_sglang.py's stand-in: argparse built from SGLang 0.5.23's own option registrations
(its flag table), printing that `--help` and refusing what that parser refuses; the host is this machine.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from fixtures_sglang import fake_sglang

from tuner.cli import main
from tuner.cli._remote import run_check
from tuner.config import load_config
from tuner.errors import ConfigError
from tuner.target import require_preflight

DFLASH = [
    "--model-path", "/models/Qwen3-8B", "--host", "127.0.0.1", "--port", "{port}", "--enable-metrics",
    "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/models/Qwen3-8B-DFlash",
    "--speculative-dflash-block-size", "16",
]  # fmt: skip


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _study(tmp_path: Path, extra: list[str], *, version: str | None, window_flag: str, env: str = "") -> Path:
    port = _port()
    command = [*fake_sglang(tmp_path), *(a.replace("{port}", str(port)) for a in DFLASH), *extra]
    version_line = f'server_version = "{version}"' if version else ""
    text = f"""
[study]
name = "sglang-check"
storage = "sqlite:///{tmp_path / 'study.db'}"

[target]
server = "sglang"
base_url = "http://127.0.0.1:{port}"
command = {json.dumps(command)}
log_dir = "{tmp_path / 'logs'}"
{version_line}
{env}

[space.window]
type = "categorical"
choices = ["none", 1024, 2048]
absent = "none"
flag = "{window_flag}"

[benchmark]
[[benchmark.scenarios]]
name = "c1"
concurrency = 1
prompt_tokens = 16
output_tokens = 8
requests = 1
"""
    path = tmp_path / "study.toml"
    path.write_text(text)
    return path


def _check(path: Path) -> tuple[int, str]:
    lines: list[str] = []
    failed = run_check(load_config(path), out=lines.append)
    return failed, "\n".join(lines)


OLD = "--speculative-dflash-draft-window-size"
NEW = "--speculative-draft-window-size"


def test_the_stand_in_really_is_that_parser(tmp_path: Path) -> None:
    import subprocess

    program = fake_sglang(tmp_path)
    shown = subprocess.run([*program, "--help"], capture_output=True, text=True, check=True).stdout
    assert NEW in shown and OLD not in shown and "--forward-pass-metrics-worker-id" not in shown
    refused = subprocess.run([*program, "--model-path", "m", OLD, "2048"], capture_output=True, text=True)
    assert refused.returncode == 2 and f"unrecognized arguments: {OLD} 2048" in refused.stderr


@pytest.mark.parametrize("version", ["0.5.23", None])
def test_a_renamed_flag_fails_with_the_new_name(tmp_path: Path, version: str | None) -> None:
    failed, out = _check(_study(tmp_path, [OLD, "2048"], version=version, window_flag=OLD))
    assert failed >= 1, out
    assert f"{OLD}: not " in out and f"did you mean {NEW} (renamed in SGLang 0.5.x" in out, out
    if version is None:  # found from --help: the draft-window rename tells 0.5.x apart from older releases
        assert "SGLang version: SGLang 0.5.x (after the draft-window rename)" in out
        assert "(from the flags --help lists)" in out
    else:
        assert "SGLang version: mainline SGLang 0.5.23 ([target] server_version)" in out


def test_the_new_spelling_passes(tmp_path: Path) -> None:
    failed, out = _check(_study(tmp_path, [NEW, "2048"], version="0.5.23", window_flag=NEW))
    assert "flags and values fit the 0.5.23 flag table" in out
    assert "flags of the command and the space are in --help" in out
    assert failed == 0, out


def test_ddtree_on_mainline_needs_the_branch(tmp_path: Path) -> None:
    extra = [NEW, "2048"]
    path = _study(tmp_path, extra, version="0.5.23", window_flag=NEW, env='env = { SGLANG_DDTREE_MAX_TOPK = "6" }')
    path.write_text(path.read_text().replace('"DFLASH"', '"DDTREE"'))
    failed, out = _check(path)
    assert failed >= 1
    assert "--speculative-algorithm DDTREE needs the DDTree branch (sgl-project/sglang PR #29907)" in out
    assert '"Unknown speculative algorithm name: DDTREE"' in out
    assert "SGLANG_DDTREE_MAX_TOPK: mainline SGLang 0.5.23 never reads it" in out
    # tune start stops before anything restarts, with the same words, as a config error.
    with pytest.raises(ConfigError, match="DDTREE needs the DDTree branch"):
        require_preflight(load_config(path))


def test_values_are_checked_too(tmp_path: Path) -> None:
    path = _study(tmp_path, [NEW, "2048"], version="0.5.23", window_flag=NEW)
    path.write_text(path.read_text() + '\n[space.kv]\ntype = "categorical"\nchoices = ["fp8_e4m3", "fp4"]\n'
                    'flag = "--speculative-draft-kv-cache-dtype"\ndefault = "fp8_e4m3"\n')
    failed, out = _check(path)
    assert failed >= 1
    assert "[space.kv] = fp4: argument --speculative-draft-kv-cache-dtype: invalid choice: 'fp4'" in out


def test_missing_enable_metrics_says_what_is_lost(tmp_path: Path) -> None:
    path = _study(tmp_path, [NEW, "2048"], version="0.5.23", window_flag=NEW)
    path.write_text(path.read_text().replace('"--enable-metrics", ', ""))
    _, out = _check(path)
    assert "--enable-metrics is not in the command" in out and "server-wide" in out


def test_tune_check_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _study(tmp_path, [OLD, "2048"], version="0.5.23", window_flag=OLD)
    assert main(["check", "--config", str(path)]) == 1
    assert f"did you mean {NEW}" in capsys.readouterr().out
