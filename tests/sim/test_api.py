"""The HTTP API: chat, completions, usage, thinking output, server info, metrics and pacing."""

from __future__ import annotations

import json

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


def test_server_info_acceptance_and_metrics(start_sim) -> None:
    sim = start_sim(*DDTREE, "--sim-time-scale", "20", "--enable-metrics")
    cfg = ServerConfig.from_argv(DDTREE, {})
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        info = http.get("/server_info").json()
        assert info["speculative_algorithm"] == "DDTREE"
        assert info["speculative_ddtree_budget"] == 12
        assert info["speculative_dflash_block_size"] == 8
        assert info["speculative_dflash_draft_window_size"] == 2048
        assert info["ddtree_max_topk"] == 6
        assert info["sim_time_scale"] == 20
        assert info["internal_states"][0]["avg_spec_accept_length"] == 0
        http.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 400})
        first = http.get("/get_server_info").json()["internal_states"][0]["avg_spec_accept_length"]
        assert first == pytest.approx(acceptance_length(cfg, context_tokens=240, workload="prose"), rel=0.05)
        metrics = http.get("/metrics").text
        assert f'sglang:spec_accept_length{{model_name="moonshotai/Kimi-K2.6"}} {first}' in metrics
        assert "sglang:num_running_reqs" in metrics
        gen_total = [ln for ln in metrics.splitlines() if ln.startswith("sglang:generation_tokens_total")]
        assert float(gen_total[0].split()[-1]) >= 400
        assert http.get("/flush_cache").status_code == 200
        assert http.post("/flush_cache").status_code == 200


def test_metrics_need_flag(start_sim) -> None:
    sim = start_sim(*DDTREE)
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        assert http.get("/metrics").status_code == 404


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
            pool.submit(http.post, "/v1/completions", json={"prompt": PROMPT, "max_tokens": 200})
            for _ in range(4)
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
