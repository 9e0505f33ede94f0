"""The HTTP API: chat, completions, usage, thinking output, server info, metrics and pacing."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tuner.sim import ServerConfig, acceptance_length, decode_tok_s
from tuner.sim.testing import sse_events

DDTREE = [
    "--speculative-algorithm",
    "DDTREE",
    "--speculative-dflash-block-size",
    "8",
    "--speculative-ddtree-budget",
    "12",
    "--speculative-dflash-draft-window-size",
    "2048",
]
DFLASH_MAINLINE = ["--sim-sglang-version", "0.5.23", "--speculative-algorithm", "DFLASH",
                   "--speculative-dflash-block-size", "8", "--speculative-draft-window-size", "2048"]  # fmt: skip
PROMPT = " ".join(["word"] * 40)


def test_streaming_chat_with_usage(start_sim) -> None:
    sim = start_sim(*DDTREE, "--sim-time-scale", "20")
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        events = sse_events(
            http,
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": 50,
                "stream_options": {"include_usage": True},
            },
        )
    assert events[-1][1] == "[DONE]"
    chunks = [json.loads(d) for _, d in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert len(text.split()) == 50
    # Speculative decoding streams several tokens per event.
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) < 25
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 40, "completion_tokens": 50, "total_tokens": 90}


def test_nonstreaming_chat_and_completions(start_sim) -> None:
    sim = start_sim(*DDTREE, "--sim-time-scale", "20")
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        chat = http.post(
            "/v1/chat/completions",
            json={
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": PROMPT}],
                "max_tokens": 17,
                "temperature": 0.7,
            },
        ).json()
        assert chat["usage"]["prompt_tokens"] == 42
        assert chat["usage"]["completion_tokens"] == 17
        assert len(chat["choices"][0]["message"]["content"].split()) == 17
        comp = http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 9}).json()
        assert comp["object"] == "text_completion"
        assert len(comp["choices"][0]["text"].split()) == 9
        assert comp["usage"]["completion_tokens"] == 9
        events = sse_events(http, "/v1/completions", {"prompt": PROMPT, "max_tokens": 9})
        text = "".join(json.loads(d)["choices"][0]["text"] for _, d in events[:-1])
        assert len(text.split()) == 9
        too_long = http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 10**6})
        assert too_long.status_code == 400


def _metric(text: str, name: str) -> list[tuple[str, float]]:
    """``(labels, value)`` of every sample of ``name`` in a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            out.append((head[len(name) :], float(value)))
    return out


def _total(text: str, name: str) -> float:
    return sum(v for _, v in _metric(text, name))


def test_server_info_is_what_sglang_reports(start_sim) -> None:
    sim = start_sim(*DDTREE, "--sim-time-scale", "20", "--decode-log-interval", "10")
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        info = http.get("/server_info").json()
        assert info["speculative_algorithm"] == "DDTREE"
        assert info["speculative_ddtree_budget"] == 12
        assert info["speculative_num_draft_tokens"] == 8
        assert info["speculative_draft_window_size"] == 2048
        assert info["version"] == "0.5.15.post1"
        # The simulator's extras: the environment's top-k cap and its time scale.
        assert info["ddtree_max_topk"] == 6 and info["sim_time_scale"] == 20
        state = info["internal_states"][0]
        assert "avg_spec_accept_length" not in state  # none until the first logging interval
        assert not [k for k in state if k.startswith("spec_num_total")]  # only the old simulator had those
        http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 20})  # fewer than 10 decode batches
        assert "avg_spec_accept_length" not in http.get("/server_info").json()["internal_states"][0]
        http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 400})
        first = http.get("/get_server_info").json()["internal_states"][0]["avg_spec_accept_length"]
        cfg = ServerConfig.from_argv(DDTREE, {})
        assert first == pytest.approx(acceptance_length(cfg, context_tokens=240, workload="prose"), rel=0.05)
        assert "Decode batch, #running-req: 1, " in sim.log() and "accept len: " in sim.log()
        assert http.get("/flush_cache").status_code == 200
        assert http.post("/flush_cache").status_code == 200


def test_acceptance_from_the_counters_matches_the_model(start_sim) -> None:
    """A scenario's acceptance from the counter deltas (generated tokens / verify calls) is the model's."""
    for version, flags in (("ddtree-pr29907", DDTREE), ("0.5.23", DFLASH_MAINLINE)):
        sim = start_sim(*flags, "--sim-time-scale", "20", "--enable-metrics")
        cfg = ServerConfig.from_argv(flags, {})
        with httpx.Client(base_url=sim.url, timeout=60) as http:
            http.get("/health_generate")  # health checks are not in the counters
            before = http.get("/metrics").text
            for _ in range(3):
                http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 600})
            after = http.get("/metrics").text
        tokens = _total(after, "sglang:generation_tokens_total") - _total(before, "sglang:generation_tokens_total")
        calls = _total(after, "sglang:spec_verify_calls_total") - _total(before, "sglang:spec_verify_calls_total")
        assert tokens == 3 * 600, version
        model = acceptance_length(cfg, context_tokens=40 + 300, workload="prose")
        assert tokens / calls == pytest.approx(model, rel=0.01), version


def test_metrics_are_labelled_per_rank(start_sim) -> None:
    sim = start_sim(*DDTREE, "--sim-time-scale", "20", "--enable-metrics", "--decode-log-interval", "5")
    every = start_sim(*DDTREE, "--sim-time-scale", "20", "--enable-metrics", "--enable-metrics-for-all-schedulers")
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 200, "stream": False})
        text = http.get("/metrics").text
    assert "# TYPE sglang:generation_tokens counter" in text
    [(labels, value)] = _metric(text, "sglang:spec_accept_length")
    assert 'tp_rank="0"' in labels and 'model_name="moonshotai/Kimi-K2.6"' in labels and value > 1
    assert 0 < _metric(text, "sglang:spec_accept_rate")[0][1] < 1
    assert dict(_metric(text, "sglang:generation_tokens_total")) == {
        '{model_name="moonshotai/Kimi-K2.6",engine_type="unified",is_streaming="false"}': 200.0,
        '{model_name="moonshotai/Kimi-K2.6",engine_type="unified",is_streaming="true"}': 0.0,
    }
    with httpx.Client(base_url=every.url, timeout=30) as http:
        ranks = _metric(http.get("/metrics").text, "sglang:spec_accept_length")
    assert sorted(labels.split('tp_rank="')[1].split('"')[0] for labels, _ in ranks) == [str(r) for r in range(8)]


def test_metrics_need_flag(start_sim) -> None:
    sim = start_sim(*DDTREE)
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        assert http.get("/metrics").status_code == 404


def test_the_ddtree_branch_refuses_logprob_and_grammar_requests(start_sim) -> None:
    """0.5.15.post1's DFLASH request check, applied by the branch to DDTREE; 0.5.23's DFLASH serves both."""
    branch = start_sim(*DDTREE, "--sim-time-scale", "20")
    mainline = start_sim(*DFLASH_MAINLINE, "--sim-time-scale", "20")
    logprobs = {"prompt": PROMPT, "max_tokens": 4, "logprobs": 2}
    grammar = {"prompt": PROMPT, "max_tokens": 4, "regex": "[a-z]+"}
    with httpx.Client(base_url=branch.url, timeout=30) as http:
        refused = http.post("/v1/completions", json=logprobs)
        assert refused.status_code == 400
        assert refused.json()["message"] == "DFLASH speculative decoding does not support return_logprob yet."
        refused = http.post("/v1/completions", json=grammar)
        assert refused.status_code == 400
        assert (
            refused.json()["message"]
            == "DFLASH speculative decoding does not support grammar-constrained decoding yet."
        )
    with httpx.Client(base_url=mainline.url, timeout=30) as http:
        assert http.post("/v1/completions", json=logprobs).status_code == 200
        assert http.post("/v1/completions", json=grammar).status_code == 200


def test_health_generates_unless_told_not_to(start_sim) -> None:
    """0.5.23 and 0.5.15 send a one-token request for ``/health`` too, unless
    SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false; either way the generation is not in the counters."""
    slow = ["--sim-time-scale", "0.1", "--enable-metrics"]  # a step takes ~0.3 s
    generating = start_sim(*DDTREE, *slow)
    quick = start_sim(*DDTREE, *slow, env={"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"})
    for server, waits in ((generating, True), (quick, False)):
        with httpx.Client(base_url=server.url, timeout=30) as http:
            t0 = time.monotonic()
            assert http.get("/health").status_code == 200
            assert (time.monotonic() - t0 > 0.2) == waits
            assert http.get("/health_generate").status_code == 200
            assert _total(http.get("/metrics").text, "sglang:generation_tokens_total") == 0


def test_streaming_rate_matches_model(start_sim) -> None:
    """Unscaled pacing at concurrency 1: within 5% of decode_tok_s."""
    sim = start_sim(*DDTREE)
    cfg = ServerConfig.from_argv(DDTREE, {})
    prompt = " ".join(["w"] * 512)
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        events = sse_events(http, "/v1/completions", {"prompt": prompt, "max_tokens": 300})
    deltas = [(t, len(json.loads(d)["choices"][0]["text"].split())) for t, d in events[:-2]]
    tokens_after_first = sum(n for _, n in deltas[1:])
    rate = tokens_after_first / (deltas[-1][0] - deltas[0][0])
    expected = decode_tok_s(cfg, concurrency=1, context_tokens=512 + 150, workload="prose")  # "w w w": no code
    assert rate == pytest.approx(expected, rel=0.05)


def test_queueing_respects_max_running_requests(start_sim) -> None:
    import concurrent.futures

    sim = start_sim(*DDTREE, "--sim-time-scale", "10", "--max-running-requests", "2", "--enable-metrics")
    with httpx.Client(base_url=sim.url, timeout=30) as http, concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [
            pool.submit(http.post, "/v1/completions", json={"prompt": PROMPT, "max_tokens": 200}) for _ in range(4)
        ]
        seen = 0
        for _ in range(20):
            metrics = http.get("/metrics").text
            running = [ln for ln in metrics.splitlines() if ln.startswith("sglang:num_running_reqs")]
            seen = max(seen, int(float(running[0].split()[-1])))
            queued = [ln for ln in metrics.splitlines() if ln.startswith("sglang:num_queue_reqs")]
            if float(queued[0].split()[-1]) > 0:
                break
        assert all(f.result().status_code == 200 for f in futures)
    assert seen <= 2
