"""Secrets reach the server and nothing else: a real study on the simulator with an API key in the launch command
and a token in its environment leaves neither in the study database, the artifacts, the report, the exports or
anything `tune` prints, while `tune apply --best` still hands the server the real values."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures_faults import Case, Run

from tuner.config import load_config
from tuner.target import endpoint_for

API_KEY = "sk-tune-test-3f9a1c77e2"
HF_TOKEN = "hf_tune_test_b81d0c4e55"
# No constraint, and a seed the simulator refuses to start (draft window below the block size): a failed trial
# whose log tail (the server prints its server_args, API key included, as SGLang does) becomes evidence.
FAILING_SEED = (
    '{ algorithm = "DFLASH", block_size = 16, draft_window = 8, max_running_requests = 64, mem_fraction_static = 0.85 }'
)
CONSTRAINT = '[[constraints]]\nleft = "draft_window"\nop = ">="\nright = "block_size"\n'


def with_secrets(text: str) -> str:
    text = text.replace('"--sim-seed", "5",', f'"--sim-seed", "5", "--api-key", "{API_KEY}",')
    env = 'env = { SGLANG_DDTREE_MAX_TOPK = "6" }'
    text = text.replace(env, env.replace(" }", f', HF_TOKEN = "{HF_TOKEN}" }}'))
    assert API_KEY in text and HF_TOKEN in text and CONSTRAINT in text
    return text.replace(CONSTRAINT, "")


@pytest.fixture
def case(tmp_path: Path, port: int) -> Iterator[Case]:
    c = Case(tmp_path, port, name="secret", trials=3)
    c.edit(with_secrets, search=f"seed_trials = [{FAILING_SEED}]")
    try:
        yield c
    finally:
        c.tune("stop")
        c.cleanup()


def files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_a_study_with_secrets_stores_and_shows_none(case: Case) -> None:
    runs: list[Run] = [case.start()]
    assert runs[0].rc == 0, runs[0].err
    assert "failed: did not start [ready]" in runs[0].err  # the failing seed ran: its evidence is stored
    report = case.root / "report"
    exports = case.root / "exports"
    exports.mkdir()
    for args in (["status"], ["status", "--json"], ["best"], ["best", "--json"], ["report", "--out", str(report)]):
        runs.append(case.tune(*args))
    for fmt in ("dropin", "command", "json"):
        run = case.tune("export", "--format", fmt)
        (exports / fmt).write_text(run.out)
        runs.append(run)
    assert all(r.rc == 0 for r in runs), [r.err for r in runs if r.rc]

    study_dir = case.storage.parent  # the study database and the artifacts beside it
    assert (study_dir / "artifacts").is_dir() and report.is_dir()
    for secret in (API_KEY, HF_TOKEN):
        for where in (study_dir, report, exports):
            assert files_holding(where, secret.encode()) == [], f"{secret} in {where}"
        assert not [r for r in runs if secret in r.out or secret in r.err], secret
    # Not vacuous: what was stored and exported names the secrets, as ***.
    rows = json.loads(runs[2].out)
    assert any("--api-key ***" in (row["command"] or "") for row in rows)
    assert all(row["env"]["HF_TOKEN"] == "***" for row in rows if row["env"])
    failed = next(row for row in rows if row["failure_phase"] == "ready")
    stored = [p for p in (study_dir / "artifacts").rglob("*") if p.is_file() and b"server_args=" in p.read_bytes()]
    assert stored, "the failed trial's server log tail was not kept as evidence"
    assert "'api_key': '***'" in stored[0].read_text() and failed["number"] == 1
    export = json.loads((exports / "json").read_text())
    assert export["supply"] == ["--api-key", "HF_TOKEN"]
    assert "# SUPPLY: --api-key and HF_TOKEN are secrets" in (exports / "dropin").read_text()
    assert "note: --api-key and HF_TOKEN are secrets, shown as ***" in runs[-2].err


def test_apply_hands_the_server_the_real_values(case: Case) -> None:
    assert case.start().rc == 0
    applied = case.tune("apply", "--best")
    assert applied.rc == 0, applied.err
    assert API_KEY not in applied.out + applied.err and HF_TOKEN not in applied.out + applied.err
    record = json.loads((case.storage.parent / "state" / f"server-{case.port}.json").read_text())
    pid = record["pid"]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert argv[argv.index(b"--api-key") + 1] == API_KEY.encode()
    assert f"HF_TOKEN={HF_TOKEN}".encode() in environ


def test_a_study_read_back_without_its_file_refuses_to_launch_with_placeholders(case: Case) -> None:
    assert case.start().rc == 0
    url = f"sqlite:///{case.storage}"
    moved = case.root / "elsewhere.toml"
    shutil.move(case.path, moved)  # the stored copy has *** where the secrets were, and no file to read them from
    refused = case.tune("resume", "--storage", url, "--trials", "4")
    assert refused.rc == 2, refused.err
    assert refused.message.startswith("tune: config error: ")
    assert "expected the values of --api-key, HF_TOKEN, which the study stores as ***" in refused.message
    assert API_KEY not in refused.err
    status = subprocess.run(  # reading needs no secret
        [sys.executable, "-m", "tuner", "status", "--storage", url], capture_output=True, text=True, cwd=case.root
    )
    assert status.returncode == 0, status.stderr
    assert "study secret: 3/3 counted trials" in status.stdout
    shutil.move(moved, case.path)  # the file back: the stored copy is completed from it
    resumed = case.tune("resume", "--storage", url, "--trials", "4")
    assert resumed.rc == 0, resumed.err
    assert resumed.out.startswith("study secret: 4/4 trials (1 run now")


def test_api_key_env_reads_the_bearer_token_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = Case(tmp_path, 30999, name="s")
    case.edit(lambda t: t.replace("[target]", '[target]\napi_key_env = "TUNE_TEST_BEARER"'))
    monkeypatch.setenv("TUNE_TEST_BEARER", "bearer-from-env-1234")
    assert endpoint_for(load_config(case.path)).headers == {"Authorization": "Bearer bearer-from-env-1234"}
    monkeypatch.delenv("TUNE_TEST_BEARER")
    run = case.tune("bench")
    assert run.rc == 3 and "Traceback" not in run.err
    assert run.message == (
        "tune: environment: [target] api_key_env = 'TUNE_TEST_BEARER', but TUNE_TEST_BEARER is not set in tune's "
        "environment (export it, then run the command again)"
    )
    assert os.environ.get("TUNE_TEST_BEARER") is None
