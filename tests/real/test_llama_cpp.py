"""`tune` against a real inference server: llama-cpp-python 0.3.36 with SmolLM2-135M and prompt-lookup decoding.

Nothing here is simulated: the server is the real program, the model a real GGUF, the answers real ones. The
study file has none of the workarounds this server once needed (health_path = "", phase markers, bool
spelling): its dialect is detected from the command. Requests are few and short: these run on 2 cores.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import optuna
import pytest

from tests.fixtures_rerun import REAL_SERVER_STALL_S, ClientRerun
from tests.real.conftest import SERVING, LlamaInstall
from tuner.cli import main
from tuner.config import load_config
from tuner.config._gate import GateSection
from tuner.dialects import LlamaCppDialect
from tuner.endpoint import Endpoint
from tuner.gate import HumanEvalGate
from tuner.sim.testing import SimProcess, free_port
from tuner.target import open_target
from tuner.trials import record_of

STUDY = """
[study]
name = "llama-real"
storage = "sqlite:///{tmp}/study.db"
trials = 4
seed = 1
on_exit = "stop"

[target]
base_url = "http://127.0.0.1:{port}"
command = {command}
log_dir = "{tmp}/logs"
stop_grace_s = 5

[readiness]
timeout_s = 240
poll_interval_s = 0.2

[space.num_pred_tokens]
type = "int"
low = 1
high = 10
flag = "--draft_model_num_pred_tokens"

[search]
confirm_top = 2           # the end-of-study confirmation runs on the real server too, at two configs x 2 visits

[benchmark]
warmup_requests = 0
repeats = 2
request_timeout_s = 120

[[benchmark.scenarios]]
name = "c1-code"
concurrency = 1
prompt_tokens = 64
prompts = "humaneval"
output_tokens = 32
requests = 1
"""


def _study(tmp_path: Path, llama: LlamaInstall, *, port: int | None = None) -> Path:
    port = port or free_port()
    path = tmp_path / "llama.toml"
    path.write_text(STUDY.format(tmp=tmp_path, port=port, command=json.dumps(llama.command(port))))
    return path


def test_the_dialect_is_detected_from_the_command(llama: LlamaInstall, tmp_path: Path) -> None:
    config = load_config(_study(tmp_path, llama))
    assert isinstance(config.dialect, LlamaCppDialect) and "llama_cpp.server" in config.dialect.reason
    assert config.readiness.health_path is None and config.readiness.generation_check
    assert config.baseline == {"num_pred_tokens": 4}


def test_check_cycle_passes(llama: LlamaInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _study(tmp_path, llama)
    try:
        assert main(["check", "--cycle", "--config", str(path)]) == 0
    finally:  # the cycle restores the base config and leaves it serving, as on a real host: stop it here
        target = open_target(load_config(path))
        try:
            target.service.stop()
        finally:
            target.close()
    out = capsys.readouterr().out
    assert "server dialect: llama.cpp (detected from the launch command: llama_cpp.server)" in out
    assert "missing: no health endpoint: readiness is a real generation only" in out
    assert "all 1 tuned flags are accepted by the server" in out
    assert "one full apply/restart/ready/benchmark/restore cycle worked" in out


@pytest.mark.timeout(900)  # four real server starts and benchmarks on a shared 2-core machine
def test_a_four_trial_study_completes(llama: LlamaInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _study(tmp_path, llama)
    started = time.monotonic()
    assert main(["start", "--config", str(path), "--trials", "4"]) == 0
    wall = time.monotonic() - started
    study = optuna.load_study(study_name="llama-real", storage=f"sqlite:///{tmp_path}/study.db")
    trials = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert len(trials) == 4
    for t in trials:  # nothing charged to readiness: the server has no /health and that is fine
        assert record_of(t).failure_phase in (None, "benchmark"), t.user_attrs
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert t.user_attrs["c1-code.tok_s"] > 0 and record_of(t).ready_s > 0
    baseline = next(t for t in trials if record_of(t).is_baseline)
    assert baseline.params == {"num_pred_tokens": 4} and baseline.state == optuna.trial.TrialState.COMPLETE
    best = max((t for t in trials if t.state == optuna.trial.TrialState.COMPLETE), key=lambda t: t.values[0])
    confirmed = study.user_attrs.get("confirmation")
    complete = sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert complete < 2 or (confirmed and len(confirmed["trials"]) == 2), confirmed
    captured = capsys.readouterr()
    assert "server dialect: llama.cpp" in captured.out + captured.err  # said once, at start
    with capsys.disabled():  # the figures docs/benchmarks.md quotes
        print(
            f"\nllama.cpp study: 4 trials in {wall:.0f} s; best num_pred_tokens={best.params['num_pred_tokens']} "
            f"{best.values[0]:.1f} vs baseline {baseline.values[0]:.1f} tok/s "
            f"({best.values[0] / baseline.values[0]:.3f}x)"
        )


_PERF = re.compile(r"llama_perf_context_print:\s+total time =\s+([\d.]+) ms")


def test_bench_agrees_with_the_servers_own_timings(
    llama_server: SimProcess, llama: LlamaInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    client_rerun: ClientRerun,
) -> None:  # fmt: skip
    """tune bench's output tok/s against llama_perf's per-request total time, both for the same requests."""
    client_rerun.lasting(REAL_SERVER_STALL_S)
    path = _study(tmp_path, llama, port=llama_server.port)
    path.write_text(path.read_text().replace("repeats = 2", "repeats = 1").replace("requests = 1", "requests = 3"))
    before = len(_PERF.findall(llama_server.log()))
    assert main(["bench", "--json", "--config", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    [result] = doc["scenarios"]
    client_rerun.check(result["client_reruns"])
    totals_ms = [float(x) for x in _PERF.findall(llama_server.log())[before:]]
    # A pass tune ran again (its client was the bottleneck) is in the log too: the counted one is the last.
    assert len(totals_ms) == 3 * (1 + result["client_reruns"]) and result["requests"] == 3, llama_server.log()[-2000:]
    totals_ms = totals_ms[-3:]
    # Streams carry no usage here: tokens were counted by the server's own tokenizer, not estimated.
    assert result["tokens_from_usage"] is True and result["accept_length"] is None
    server_tok_s = result["output_tokens"] / (sum(totals_ms) / 1000)
    ratio = result["output_tok_s"] / server_tok_s
    with capsys.disabled():
        print(f"\ntune bench {result['output_tok_s']:.1f} tok/s vs llama_perf {server_tok_s:.1f} tok/s: {ratio:.3f}")
    assert 0.95 <= ratio <= 1.05


def test_the_gate_judges_real_answers_in_the_sandbox(llama_server: SimProcess) -> None:
    """The tiny model mostly fails HumanEval: what is checked is that real answers went through the sandbox."""
    section = GateSection(tasks=("HumanEval/0", "HumanEval/31"), max_tokens=160, concurrency=1, min_passed=0)
    gate = HumanEvalGate(endpoint=Endpoint(base_url=llama_server.url), section=section)
    try:
        result = gate.run()
    finally:
        gate.close()
    assert result.total == 2 and result.passed == sum(o.passed for o in result.outcomes)
    for outcome in result.outcomes:
        assert outcome.response.strip(), outcome  # a real answer came back
        assert not outcome.reason.startswith("request failed"), outcome.reason
        if outcome.code:  # code was found: the sandbox ran the tests against it and said why it passed or not
            assert outcome.passed or outcome.reason
    assert SERVING in llama_server.log()
