"""`tune` against llama.cpp's own server, ``llama-server``, with real speculative decoding on the CPU.

The server is the real C++ program built from the llama.cpp sources llama-cpp-python 0.3.36 vendors; the
target is SmolLM2-135M, drafting for itself (``-md`` with the same GGUF) or with a model-free n-gram drafter.
Its own figures are the reference: the per-request ``total time`` and ``draft acceptance ... mean len`` lines
of its log and the ``llamacpp:spec_decode_*`` counters of ``/metrics``. Outputs are short: 2 cores.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import optuna
import pytest

from tests.real.conftest import LlamaServerInstall, spawn_llama_server
from tuner.bench import parse_prometheus
from tuner.cli import main
from tuner.config import load_config
from tuner.dialects import LlamaServerDialect
from tuner.sim.testing import SimProcess, free_port
from tuner.target import open_target
from tuner.trials import attrs, is_counted, recommended

BENCH = """
[study]
name = "llama-server-bench"
storage = "sqlite:///{tmp}/bench.db"

[target]
base_url = "http://127.0.0.1:{port}"
command = {command}

[space.draft_max]
type = "int"
low = 1
high = 8
flag = "--spec-draft-n-max"
default = 3

[benchmark]
warmup_requests = 0
repeats = 1
request_timeout_s = 120

[[benchmark.scenarios]]
name = "c1-code"
concurrency = 1
prompts = "humaneval"
prompt_tokens = 64
output_tokens = 48
requests = 2

[[benchmark.scenarios]]
name = "c1-words"
concurrency = 1
prompt_tokens = 128
output_tokens = 48
requests = 2

[[benchmark.scenarios]]
name = "c1-long"
concurrency = 1
prompt_tokens = 512
output_tokens = 32
requests = 2
"""

#: The first scenario alone.
BENCH_CODE = "[[benchmark.scenarios]]".join(BENCH.split("[[benchmark.scenarios]]")[:2])

_TOTAL = re.compile(r"total time =\s+([\d.]+) ms /\s+(\d+) tokens")
_EVAL = re.compile(r"\s eval time =\s+[\d.]+ ms /\s+(\d+) tokens")
_DRAFTED = re.compile(r"draft acceptance = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s+([\d.]+)")


def _write(path: Path, template: str, *, port: int, command: list[str]) -> Path:
    path.write_text(template.format(tmp=path.parent, port=port, command=json.dumps(command)))
    return path


@pytest.fixture(scope="module")
def drafting_server(
    llama_server_install: LlamaServerInstall, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimProcess]:
    port = free_port()
    argv = llama_server_install.command(port, *llama_server_install.draft_model())
    server = spawn_llama_server(argv, tmp_path_factory.mktemp("llama-server"), port)
    try:
        yield server
    finally:
        server.kill()


def _counters(url: str) -> dict[str, float]:
    return parse_prometheus(httpx.get(url + "/metrics", timeout=10).text)


def _bench(path: Path, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert main(["bench", "--json", "--config", str(path)]) == 0
    return json.loads(capsys.readouterr().out)["scenarios"]


def test_bench_agrees_with_the_servers_own_timings_and_counters(
    drafting_server: SimProcess, llama_server_install: LlamaServerInstall, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Three scenarios: tune bench's tok/s against the server's per-request total time for the same requests,
    and its acceptance length against the server's counters and its per-request "mean len" log lines."""
    command = llama_server_install.command(drafting_server.port, *llama_server_install.draft_model())
    path = _write(tmp_path / "bench.toml", BENCH, port=drafting_server.port, command=command)
    config = load_config(path)
    assert isinstance(config.dialect, LlamaServerDialect) and config.readiness.health_path == "/health"
    log_start = len(drafting_server.log())
    before = _counters(drafting_server.url)
    results = _bench(path, capsys)
    after = _counters(drafting_server.url)
    log = drafting_server.log()[log_start:]
    totals = [(float(ms), int(n)) for ms, n in _TOTAL.findall(log)]
    generated = [int(n) for n in _EVAL.findall(log)]
    drafted = [(int(a), int(d), float(mean)) for a, d, mean in _DRAFTED.findall(log)]
    assert len(totals) == len(generated) == len(drafted) == 6, log[-3000:]
    ratios = []
    for k, result in enumerate(results):
        mine = slice(2 * k, 2 * k + 2)
        assert result["requests"] == 2 and result["tokens_from_usage"] is True
        assert result["output_tokens"] == sum(generated[mine])  # usage counts what the server generated
        server_tok_s = result["output_tokens"] / (sum(ms for ms, _ in totals[mine]) / 1000)
        ratios.append(result["output_tok_s"] / server_tok_s)
        # The server's own per-request mean lengths, pooled: 1 + accepted / verification steps.
        accepted = sum(a for a, _, _ in drafted[mine])
        steps = sum(round(a / (mean - 1)) for a, _, mean in drafted[mine] if mean > 1)
        assert result["accept_length"] == pytest.approx(1 + accepted / steps, rel=0.01), (result, drafted[mine])
    d_accepted, d_drafts = (
        after[f"llamacpp:spec_decode_num_{name}_total"] - before[f"llamacpp:spec_decode_num_{name}_total"]
        for name in ("accepted_tokens", "drafts")
    )
    assert d_accepted == sum(a for a, _, _ in drafted) and d_drafts > 0
    pooled = sum(r["accept_length"] * r["output_tokens"] for r in results) / sum(r["output_tokens"] for r in results)
    with capsys.disabled():
        print(
            "\nllama-server: tune bench tok/s / server timings = "
            + ", ".join(f"{r['name']} {x:.3f}" for r, x in zip(results, ratios, strict=True))
            + "; accept length "
            + ", ".join(f"{r['accept_length']:.2f}" for r in results)
            + f" (counters over all: {1 + d_accepted / d_drafts:.2f}, tune's token-weighted: {pooled:.2f})"
        )
    assert all(0.98 <= x <= 1.02 for x in ratios), ratios


def test_a_model_free_drafter_and_no_speculation(
    llama_server_install: LlamaServerInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An n-gram drafter needs no draft model and still reports acceptance; without speculation there is none."""
    ngram = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8"]
    found = {}
    for label, speculation in (("ngram", ngram), ("none", [])):
        port = free_port()
        command = llama_server_install.command(port, *speculation)
        server = spawn_llama_server(command, tmp_path, port)
        try:
            path = _write(tmp_path / f"{label}.toml", BENCH_CODE, port=port, command=command)
            [result] = _bench(path, capsys)
            found[label] = (result, server.log())
        finally:
            server.kill()
    ngram_result, ngram_log = found["ngram"]
    drafted = [(int(a), float(mean)) for a, _, mean in _DRAFTED.findall(ngram_log)]
    accepted = sum(a for a, _ in drafted)
    steps = sum(round(a / (mean - 1)) for a, mean in drafted if mean > 1)
    assert ngram_result["accept_length"] == pytest.approx(1 + accepted / steps, rel=0.01), ngram_log[-2000:]
    none_result, none_log = found["none"]
    assert none_result["accept_length"] is None and "draft acceptance" not in none_log
    with capsys.disabled():
        print(
            f"\nllama-server ngram-simple: accept length {ngram_result['accept_length']:.2f}, "
            f"{ngram_result['output_tok_s']:.1f} tok/s; no speculation {none_result['output_tok_s']:.1f} tok/s"
        )


def _lean_study(text: str, tmp: Path) -> str:
    head = text.split("[benchmark]")[0]
    head = re.sub(r"^trials = .*$", f'trials = 3\nseed = 3\nstorage = "sqlite:///{tmp}/study.db"', head, flags=re.M)
    head = re.sub(r"^on_exit = .*$", 'on_exit = "stop"', head, flags=re.M)
    head = head.replace('manager = "process"', f'manager = "process"\nlog_dir = "{tmp}/logs"\nstop_grace_s = 5')
    head = re.sub(r"^timeout_s = 900.*$", "timeout_s = 180\npoll_interval_s = 0.2", head, flags=re.M)
    return head + """
[search]
confirm_top = 2

[benchmark]
warmup_requests = 0
repeats = 1
request_timeout_s = 120

[[benchmark.scenarios]]
name = "c1-code"
concurrency = 1
prompts = "humaneval"
prompt_tokens = 64
output_tokens = 32
requests = 1

[gate]
enabled = true
tasks = ["HumanEval/0", "HumanEval/31"]
min_passed = 0
max_tokens = 96
concurrency = 1
"""


@pytest.mark.timeout(900)  # real starts, benchmarks, a confirmation and a gate on a shared 2-core machine
def test_init_check_and_a_study_over_the_speculative_knobs(
    llama_server_install: LlamaServerInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's story: `tune init -- llama-server ... -md d.gguf --draft-max 4`, `tune check --cycle`, then
    `tune start`: N counted trials, the server's acceptance on every speculative one, the winner confirmed and
    gated."""
    port = free_port()
    base = llama_server_install.command(port)
    base.remove("--metrics")  # tune init adds it
    drafter = ["-md", str(llama_server_install.gguf), "-td", "1", "--draft-max", "4"]  # the removed spelling
    path = tmp_path / "study.toml"
    assert main(["init", "--out", str(path), "--", *base, *drafter]) == 0
    out = capsys.readouterr().out
    assert "note: --draft-max is --spec-draft-n-max now" in out and "note: added --spec-type draft-simple" in out
    path.write_text(_lean_study(path.read_text(), tmp_path))
    config = load_config(path)
    assert config.baseline == {"spec_type": "draft-simple", "draft_max": 4, "draft_min": 0, "draft_p_min": 0.0}
    try:
        assert main(["check", "--cycle", "--config", str(path)]) == 0
    finally:  # the cycle leaves the base config serving, as on a real host
        target = open_target(config)
        try:
            target.service.stop()
        finally:
            target.close()
    out = capsys.readouterr().out
    assert "server dialect: llama-server ([target] server)" in out  # tune init wrote it down
    assert "all 4 tuned flags are accepted by the server" in out
    assert "one full apply/restart/ready/benchmark/restore cycle worked" in out

    started = time.monotonic()
    assert main(["start", "--config", str(path)]) == 0
    wall = time.monotonic() - started
    study = optuna.load_study(study_name="study", storage=f"sqlite:///{tmp_path}/study.db")
    counted = [t for t in study.trials if is_counted(t)]  # not a duplicate of a configuration measured before
    assert len(counted) == 3, [(t.number, t.state, t.params, t.user_attrs) for t in study.trials]
    complete = [t for t in counted if t.state == optuna.trial.TrialState.COMPLETE]
    # Without a drafter the draft settings do nothing (llama.cpp's speculative.cpp): one config, measured once.
    assert len([t for t in counted if t.params["spec_type"] == "none"]) <= 1, [t.params for t in counted]
    for t in complete:
        accept = t.user_attrs.get("c1-code.accept_length")
        if t.params["spec_type"] == "none":
            assert accept is None, t.user_attrs
        else:
            assert accept is not None and accept >= 1, t.user_attrs
    confirmed = study.user_attrs.get("confirmation")
    assert len(complete) < 2 or (confirmed and len(confirmed["trials"]) == 2), confirmed
    rec = recommended(study)
    assert rec is not None and rec.confirmed and rec.trial.number in confirmed["trials"]
    # Judged in the sandbox: real answers to both problems (the tiny model mostly fails them; min_passed = 0).
    user = rec.trial.user_attrs
    assert rec.gated and user[attrs.CORRECT] is True and user[attrs.GATE], user
    with capsys.disabled():
        print(
            f"\nllama-server study: {len(counted)} trials in {wall:.0f} s; "
            + "; ".join(
                f"#{t.number} {t.params} {t.values[0]:.1f} tok/s accept {t.user_attrs.get('c1-code.accept_length')}"
                for t in complete
            )
        )
