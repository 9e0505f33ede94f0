"""`tune` against llama.cpp's own server, ``llama-server``, with real speculative decoding on the CPU.

The server is the real C++ program built from the llama.cpp sources llama-cpp-python 0.3.36 vendors; the
target is SmolLM2-135M, drafting for itself (``-md`` with the same GGUF) or with a model-free n-gram drafter.
Its own figures are the reference: the per-request ``total time`` and ``draft acceptance ... mean len`` lines
of its log and the ``llamacpp:spec_decode_*`` counters of ``/metrics``; for an open-loop scenario with an SLO,
each slot's ``eval time`` and the log's timestamps (when the slot took a request, when it finished it). Outputs
are short: 2 cores.
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import optuna
import pytest

from tests.fixtures_rerun import REAL_SERVER_STALL_S, ClientRerun
from tests.real.conftest import LlamaServerInstall, spawn_llama_server
from tuner.bench import arrival_schedule
from tuner.cli import main
from tuner.config import StudyConfig, load_config
from tuner.dialects import LlamaServerDialect, parse_prometheus
from tuner.sim.testing import SimProcess, free_port
from tuner.stats import clopper_pearson, percentile
from tuner.target import open_target
from tuner.trials import is_counted, recommended, record_of

#: The target, the one knob and the benchmark's settings both files below share.
_COMMON = """
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
"""

BENCH = """
[study]
name = "llama-server-bench"
storage = "sqlite:///{tmp}/bench.db"
""" + _COMMON + """
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
#: A model-free drafter (lookup 2, draft 8): its acceptance varies with what is generated, so the requests' TPOTs
#: spread (~11-35 ms on the 135M model) and a limit between them splits them into met and missed.
NGRAM = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8"]
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
    capsys: pytest.CaptureFixture[str], client_rerun: ClientRerun,
) -> None:  # fmt: skip
    """Three scenarios: tune bench's tok/s against the server's per-request total time for the same requests,
    and its acceptance length against the server's counters and its per-request "mean len" log lines."""
    client_rerun.lasting(REAL_SERVER_STALL_S)
    command = llama_server_install.command(drafting_server.port, *llama_server_install.draft_model())
    path = _write(tmp_path / "bench.toml", BENCH, port=drafting_server.port, command=command)
    config = load_config(path)
    assert isinstance(config.dialect, LlamaServerDialect) and config.readiness.health_path == "/health"
    log_start = len(drafting_server.log())
    before = _counters(drafting_server.url)
    results = _bench(path, capsys)
    client_rerun.check(sum(r["client_reruns"] for r in results))
    after = _counters(drafting_server.url)
    log = drafting_server.log()[log_start:]
    totals = [(float(ms), int(n)) for ms, n in _TOTAL.findall(log)]
    generated = [int(n) for n in _EVAL.findall(log)]
    drafted = [(int(a), int(d), float(mean)) for a, d, mean in _DRAFTED.findall(log)]
    # Each scenario's requests, and those of any pass tune ran again (client-bound): its counted pass is its last.
    ends = list(itertools.accumulate(2 * (1 + r["client_reruns"]) for r in results))
    assert len(totals) == len(generated) == len(drafted) == ends[-1], log[-3000:]
    ratios = []
    for end, result in zip(ends, results, strict=True):
        mine = slice(end - 2, end)
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
    # tune's tok/s never beats the server's own timers by more than their rounding, and falls short of them by the
    # time around them: the HTTP exchange, tokenizing, the client's event loop. That share grows with the
    # machine's load (2.4% with the whole suite on 2 cores): 5% still catches a pass timed or counted wrong.
    assert all(0.95 <= x <= 1.02 for x in ratios), ratios


def test_a_model_free_drafter_and_no_speculation(
    llama_server_install: LlamaServerInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An n-gram drafter needs no draft model and still reports acceptance; without speculation there is none."""
    found = {}
    for label, speculation in (("ngram", NGRAM), ("none", [])):
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
    record = record_of(rec.trial)
    assert rec.gated and record.correct is True and record.gate, record
    with capsys.disabled():
        print(
            f"\nllama-server study: {len(counted)} trials in {wall:.0f} s; "
            + "; ".join(
                f"#{t.number} {t.params} {t.values[0]:.1f} tok/s accept {t.user_attrs.get('c1-code.accept_length')}"
                for t in complete
            )
        )


# --- An open-loop scenario with an SLO, judged against the server's own per-request timings ---------------------

OPEN_LOOP = """
[study]
name = "llama-server-slo"
storage = "sqlite:///{tmp}/slo.db"
""" + _COMMON + """seed = {seed}

[slo]
tpot_s = {tpot_s}
attainment = 0.9

[[benchmark.scenarios]]
name = "open-0.6rps"
rate = 0.6
prompt_tokens = 32
output_tokens = 64
requests = 12
"""

#: The benchmark seed of every pass: arrivals that offer about the nominal rate (12 Poisson arrivals vary widely:
#: seed 0's offer 0.40 req/s, seed 9's 1.15). Every pass sends the same prompts at the same times, so the TPOTs
#: of a pass and the next differ only by the machine's load (drafts are accepted alike: greedy decoding).
SEED = 6
#: How late a chunk may reach the client after the server logged the event, on a loaded 2-core machine: the
#: server's HTTP thread and the client compete with its compute thread (one that starts the next queued prompt
#: at once). Measured up to 54 ms for the first or last chunk of a request; about twice that. On top of it, a
#: pass allows the longest stall of the client's event loop that tune itself reports for it
#: (``client_stall_s``: every event read meanwhile was stamped late; a longer one than its client-bound bound
#: made tune run the pass again).
DELIVERY_S = 0.1
#: The slot's clocks and tune's agree to within this share beyond the delivery (measured: under 0.7%).
RELATIVE = 0.01

# llama-server's log with --log-timestamps --log-prefix: "M.SS.mmm.uuu I slot print_timing: id 0 | task 7 | ..."
_STAMP = r"^(\d+)\.(\d+)\.(\d+)\.(\d+) I slot "
_LAUNCH = re.compile(_STAMP + r"launch_slot_: id +\d+ \| task (\d+) \|", re.M)
_TIMING = re.compile(
    _STAMP + r"print_timing: id +\d+ \| task (\d+) \| +(prompt eval|eval|total) time = +([\d.]+) ms / +(\d+) tokens",
    re.M,
)


@dataclass(frozen=True)
class ServerTask:
    """One request as llama-server's log tells it: seconds on the log's own clock (its timestamps: the wall clock
    since the server started; a pass spans seconds, so it ticks as the client's monotonic one), and the slot's
    timings."""

    launched_s: float
    """When the slot took the task: after any wait in the server's queue for the one slot."""
    done_s: float
    """When it logged the timings: the last token was generated."""
    prompt_ms: float
    eval_ms: float
    """From the first token (sampled with the prompt's last batch) to the last (server-common.h t_gen_ms)."""
    tokens: int

    @property
    def tpot_s(self) -> float:
        """The slot's own time per output token after the first: its eval time over its decode steps."""
        return self.eval_ms / 1000 / (self.tokens - 1)

    @property
    def first_token_s(self) -> float:
        return self.done_s - self.eval_ms / 1000


def _stamp(m: re.Match[str]) -> float:
    minutes, seconds, ms, us = (int(x) for x in m.groups()[:4])
    return minutes * 60 + seconds + ms / 1e3 + us / 1e6


def _server_tasks(log: str) -> list[ServerTask]:
    """The finished tasks of ``log``, in the order the slot took them (one slot: the order they reached it)."""
    launched = {int(m.group(5)): _stamp(m) for m in _LAUNCH.finditer(log)}
    timings: dict[int, dict[str, tuple[float, float, int]]] = {}
    for m in _TIMING.finditer(log):
        timings.setdefault(int(m.group(5)), {})[m.group(6)] = (_stamp(m), float(m.group(7)), int(m.group(8)))
    tasks = [
        ServerTask(
            launched_s=launched[task],
            done_s=t["total"][0],
            prompt_ms=t["prompt eval"][1],
            eval_ms=t["eval"][1],
            tokens=t["eval"][2],
        )
        for task, t in timings.items()
    ]
    return sorted(tasks, key=lambda t: t.launched_s)


def _tolerance(task: ServerTask, delivery: float) -> float:
    """How far tune's TPOT of ``task`` may be from the slot's: the clocks' share, and a first or last chunk
    ``delivery`` late spread over the decode steps."""
    return RELATIVE * task.tpot_s + delivery / (task.tokens - 1)


def _met_bounds(tasks: list[ServerTask], limit: float, delivery: float) -> tuple[int, int]:
    """How many requests tune may count within a TPOT ``limit``: at least those the server's figure puts within
    it by more than the tolerance, at most all but those it puts over it by more (the set between: the band)."""
    surely_met = sum(1 for t in tasks if t.tpot_s + _tolerance(t, delivery) <= limit)
    surely_missed = sum(1 for t in tasks if t.tpot_s - _tolerance(t, delivery) > limit)
    return surely_met, len(tasks) - surely_missed


def _server_latencies(tasks: list[ServerTask], schedule: list[float]) -> tuple[list[float], list[float], float]:
    """Per request, the server's TTFT and end to end from its arrival, and the longest wait in its queue.

    The log does not say when a request arrived, but the schedule says when each was due after the first, and
    no request is taken before it arrives: the schedule's start on the log's clock is min(taken - due), reached
    (within the client's send and the server's parse) by any request that found the slot free."""
    origin = min(t.launched_s - due for t, due in zip(tasks, schedule, strict=True))
    ttft = [t.first_token_s - origin - due for t, due in zip(tasks, schedule, strict=True)]
    e2e = [t.done_s - origin - due for t, due in zip(tasks, schedule, strict=True)]
    wait = max(t.launched_s - origin - due for t, due in zip(tasks, schedule, strict=True))
    return ttft, e2e, wait


def _check_percentiles(result: dict, name: str, tune_key: str, server: list[float], tolerance: float) -> float:
    """tune's p50/p90/p99 of a per-request figure against the same percentiles of the server's: when every
    request agrees within ``tolerance``, so does every order statistic, and so every interpolated percentile."""
    worst = 0.0
    for p in (50, 90, 99):
        theirs = percentile(server, p)
        assert theirs is not None
        mine = result[f"{tune_key}_p{p}_s"]
        assert mine == pytest.approx(theirs, abs=tolerance), (name, p, mine, theirs, sorted(server))
        worst = max(worst, abs(mine - theirs))
    return worst


def _check_open_loop_run(
    result: dict, tasks: list[ServerTask], config: StudyConfig, limit: float
) -> dict[str, float]:  # fmt: skip
    """One `tune bench` pass against the server's log of it (module notes); the figures for the summary line."""
    [scenario] = config.benchmark.scenarios
    n = scenario.requests
    assert result["requests"] == len(tasks) == n and result["errors"] == 0, (result, tasks)
    delivery = DELIVERY_S + result["client_stall_s"]
    assert all(t.tokens == scenario.output_tokens for t in tasks), tasks  # usage counts what the slot generated
    assert result["output_tokens"] == n * scenario.output_tokens
    schedule = arrival_schedule(scenario, count=n, seed=config.benchmark.seed)
    assert schedule is not None and result["offered_rps"] == pytest.approx((n - 1) / (schedule[-1] - schedule[0]))
    # Completions after the first over their span: tune's stream ends against the server's logged ends.
    server_span = max(t.done_s for t in tasks) - min(t.done_s for t in tasks)
    assert (n - 1) / result["achieved_rps"] == pytest.approx(server_span, abs=delivery), (result, server_span)
    # The percentiles and the verdict are the steady requests': the pass's first `fill_requests` to arrive (its
    # queue filling, tuner.bench._steady) are left out, so they are left out of the server's figures too.
    fill = result["fill_requests"]
    steady = tasks[fill:]
    tpot_tolerance = max(_tolerance(t, delivery) for t in tasks)
    tpot = _check_percentiles(result, "tpot", "tpot", [t.tpot_s for t in steady], tpot_tolerance)
    ttft, e2e, wait = _server_latencies(tasks, schedule)
    ttft_worst = _check_percentiles(result, "ttft", "ttft", ttft[fill:], delivery)
    e2e_worst = _check_percentiles(result, "e2e", "e2e", e2e[fill:], delivery)
    # Attainment: a count of met requests between the bounds, its exact interval, and the verdict they imply.
    slo = scenario.slo
    assert slo is not None and slo.tpot_s == limit
    judged = result["slo_requests"]
    assert judged == len(steady) and 0 < judged <= n, (judged, fill)
    met = round(result["attainment"] * judged)
    assert result["attainment"] == pytest.approx(met / judged, abs=1e-12)
    low, high = _met_bounds(steady, limit, delivery)
    assert low <= met <= high, (met, low, high, limit, sorted(t.tpot_s for t in tasks))
    conf = config.benchmark.confidence
    # The interval is the exact one of the count, or the busy periods' where those are wider (one slot: a request
    # that arrives while another is served waits, and the two miss or meet together).
    cp_low, cp_high = clopper_pearson(met, judged, conf)
    assert result["attainment_low"] <= cp_low + 1e-9 and result["attainment_high"] >= cp_high - 1e-9, result
    verdicts = {clopper_pearson(k, judged, conf)[1] < slo.attainment for k in range(low, high + 1)}
    missed = result["slo_verdict"] == "missed"
    assert len(verdicts) == 2 or verdicts == {missed}, (met, low, high, result["attainment_high"])
    return {
        "requests": judged, "limit": limit, "met": met, "low": low, "high": high,
        "server_met": sum(t.tpot_s <= limit for t in steady), "fill": fill,
        "tpot_worst": tpot, "ttft_worst": ttft_worst, "e2e_worst": e2e_worst, "wait": wait,
        "missed": float(missed), "achieved": result["achieved_rps"], "server_achieved": (n - 1) / server_span,
        "stall": result["client_stall_s"], "reruns": result["client_reruns"],
    }  # fmt: skip


def _summary(r: dict[str, float]) -> str:
    verdict = "missed" if r["missed"] else "met"
    return (
        f"TPOT {r['limit'] * 1000:.1f} ms: server {r['server_met']:.0f}/{r['requests']:.0f} steady met "
        f"({r['fill']:.0f} fill), tune {r['met']:.0f} "
        f"(allowed {r['low']:.0f}-{r['high']:.0f}), {verdict}; percentiles within TPOT {r['tpot_worst'] * 1000:.2f} "
        f"ms, TTFT {r['ttft_worst'] * 1000:.0f} ms, E2E {r['e2e_worst'] * 1000:.0f} ms; achieved {r['achieved']:.3f} "
        f"(server {r['server_achieved']:.3f}) req/s; longest queue wait {r['wait']:.2f} s; client stall "
        f"{r['stall'] * 1000:.0f} ms, {r['reruns']:.0f} reruns"
    )


def _open_loop_pass(server: SimProcess, path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, list]:
    log_start = len(server.log())
    rows_path = path.with_suffix(".requests.jsonl")
    rc = main(["bench", "--json", "--config", str(path), "--requests", str(rows_path)])
    [result] = json.loads(capsys.readouterr().out)["scenarios"]
    assert rc in (0, 4), rc  # 4: the pass misses its SLO (docs/faults.md), as the pass with the median limit may
    tasks = _server_tasks(server.log()[log_start:])
    # A pass tune ran again (its client was the bottleneck) is in the log too: the counted one is the last.
    assert len(tasks) == result["requests"] * (1 + result["client_reruns"]), (result, tasks)
    tasks = tasks[len(tasks) - result["requests"] :]
    rows = [row for line in rows_path.read_text().splitlines() if (row := json.loads(line))["counted"]]
    assert len(rows) == len(tasks)
    # The slot takes requests in the order they reach the server, which is the schedule's unless the client sent
    # two close arrivals out of order (a loaded machine delays a send by more than their gap). One slot serves one
    # request at a time, so the order of the first tokens tune received is the slot's order: the server's tasks
    # are put back in the rows' (arrival) order by it.
    by_first_token = sorted(range(len(rows)), key=lambda k: rows[k]["first_token_s"])
    in_arrival_order = [tasks[0]] * len(tasks)
    for taken, k in enumerate(by_first_token):
        in_arrival_order[k] = tasks[taken]
    _check_each_request(rows, in_arrival_order, DELIVERY_S + result["client_stall_s"])
    return result, in_arrival_order


def _check_each_request(rows: list[dict], tasks: list[ServerTask], delivery: float) -> None:
    """Request by request (tune's ``--requests`` rows against the log's tasks, both in arrival order): each first
    token and end reached tune a delivery after the server logged it, so on the two clocks their differences
    spread over at most ``delivery``; a failure names the request."""
    assert len(rows) == len(tasks)
    pairs = list(enumerate(zip(rows, tasks, strict=True)))
    lags = [(row["end_s"] - task.done_s, "end", k) for k, (row, task) in pairs]
    lags += [(row["first_token_s"] - task.first_token_s, "first token", k) for k, (row, task) in pairs]
    earliest, latest = min(lags), max(lags)
    assert latest[0] - earliest[0] <= delivery, (
        f"request {latest[2]}'s {latest[1]} reached tune {latest[0] - earliest[0]:.3f} s later than request "
        f"{earliest[2]}'s {earliest[1]} did after the server logged it (allowed {delivery:.3f} s)"
    )


def test_open_loop_slo_attainment_agrees_with_the_servers_own_timings(
    llama_server_install: LlamaServerInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    client_rerun: ClientRerun,
) -> None:
    """Poisson arrivals at about the one-slot server's capacity (some requests wait for the slot) with a TPOT
    limit. Each pass is checked against the server's log: the requests it finished, the offered rate (the
    schedule's) and achieved rate (its logged ends), TPOT against each slot's own decode timing, TTFT and end to
    end against its logged first and last tokens from the arrival, and the attainment, its interval and the
    verdict against those the slot's timings give for the same limit. First a limit every request meets, then
    the same pass with one at the median of the server's TPOTs in it, so some requests meet it and some miss."""
    client_rerun.lasting(REAL_SERVER_STALL_S)
    port = free_port()
    # No prompt cache across requests (--cache-ram 0): a pass's prompts are evaluated as the first pass's were.
    command = llama_server_install.command(port, *NGRAM, "--cache-ram", "0", "--log-timestamps", "--log-prefix")
    server = spawn_llama_server(command, tmp_path, port)
    runs: list[dict[str, float]] = []
    limit = 1.0  # every request meets a second per token
    try:
        for k in range(3):  # a third pass only when load moved every request past the median
            text = OPEN_LOOP.format(tmp=tmp_path, port=port, command=json.dumps(command), seed=SEED, tpot_s=limit)
            path = tmp_path / f"open-{k}.toml"
            path.write_text(text)
            result, tasks = _open_loop_pass(server, path, capsys)
            runs.append(_check_open_loop_run(result, tasks, load_config(path), limit))
            if len(runs) > 1 and 0 < runs[-1]["server_met"] < runs[-1]["requests"]:
                break
            limit = statistics.median(t.tpot_s for t in tasks[int(runs[-1]["fill"]) :])
    finally:
        server.kill()
    client_rerun.check(sum(int(r["reruns"]) for r in runs))
    first, last = runs[0], runs[-1]
    assert first["met"] == first["server_met"] == first["requests"] and not first["missed"], first
    assert len(runs) > 1 and 0 < last["server_met"] < last["requests"], runs  # the limit split them
    with capsys.disabled():
        print("\nllama-server open loop + SLO: " + "; ".join(map(_summary, runs)))

