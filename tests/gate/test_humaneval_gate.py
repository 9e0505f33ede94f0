"""The HumanEval gate end to end: real HumanEval problems, a real simulator subprocess, the real sandbox."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tuner.config._gate import DEFAULT_TASKS, GateSection, parse_gate
from tuner.config._reader import Table
from tuner.endpoint import Endpoint
from tuner.errors import ConfigError, GateFailed
from tuner.gate import (
    GateResult,
    HumanEvalGate,
    ProblemOutcome,
    RlimitJudge,
    check_gate,
    check_problems,
    load_problems,
    read_problem_file,
    render_prompt,
)
from tuner.sim import ServerConfig, corrupts_code
from tuner.sim.testing import SimFleet, SimProcess, free_port

NORMAL = [
    "--host", "127.0.0.1", "--sim-load-time", "0.3", "--sim-time-scale", "20",
    "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "12",
    "--speculative-dflash-block-size", "8", "--speculative-dflash-draft-window-size", "2048",
]  # fmt: skip
# The simulated buggy kernel path: wide DDTree (budget >= 24, top-k >= 9); fewer running requests so it fits.
CORRUPTING = [*NORMAL, "--speculative-ddtree-budget", "24", "--max-running-requests", "16"]
CORRUPTING_ENV = {"SGLANG_DDTREE_MAX_TOPK": "9"}

SimFactory = Callable[..., SimProcess]


@pytest.fixture
def sim_factory(tmp_path: Path) -> Iterator[SimFactory]:
    fleet = SimFleet(log_dir=tmp_path)
    yield lambda args, env=None: fleet.start(*args, env=env)
    fleet.close()


def _run_gate(url: str, section: GateSection | None = None) -> GateResult:
    gate = HumanEvalGate(endpoint=Endpoint(base_url=url), section=section or GateSection())
    try:
        return gate.run()
    finally:
        gate.close()


def test_default_tasks_exist_and_are_distinct() -> None:
    problems = load_problems(GateSection())
    assert [p.task_id for p in problems] == list(DEFAULT_TASKS)
    assert len({p.entry_point for p in problems}) == len(DEFAULT_TASKS)


def test_a_healthy_config_passes_all_five(sim_factory: SimFactory) -> None:
    sim = sim_factory(NORMAL)
    result = _run_gate(sim.url)
    assert result.passed == result.total == 5, result.summary()
    assert result.summary().startswith("gate 5/5 passed in ")
    check_gate(result, GateSection())  # does not raise
    for outcome in result.outcomes:
        assert outcome.passed and outcome.reason == ""
        assert "<think>" in outcome.response  # reasoning_content kept for inspection


def test_inline_thinking_passes_too(sim_factory: SimFactory) -> None:
    sim = sim_factory([*NORMAL, "--sim-thinking", "inline"])
    result = _run_gate(sim.url)
    assert result.passed == 5, result.summary()


def test_the_corrupting_config_fails_the_gate(sim_factory: SimFactory) -> None:
    assert corrupts_code(ServerConfig.from_argv(CORRUPTING, CORRUPTING_ENV))
    assert not corrupts_code(ServerConfig.from_argv(NORMAL, {}))
    sim = sim_factory(CORRUPTING, CORRUPTING_ENV)
    section = GateSection()
    result = _run_gate(sim.url, section)
    assert result.passed < section.min_passed, result.summary()
    failed = result.failures
    assert failed
    for outcome in failed:
        assert outcome.reason  # why it failed
        assert "_kernel_fault" in outcome.code  # the corrupted answer, kept for inspection
        assert outcome.response
    with pytest.raises(GateFailed) as info:
        check_gate(result, section)
    assert info.value.reason == f"correctness gate: {result.passed}/5 passed (need 4)"
    for outcome in failed:
        assert outcome.task_id in info.value.evidence


def test_a_local_jsonl_gz_file_works(sim_factory: SimFactory, tmp_path: Path) -> None:
    # Real problems renamed: the simulator recognises them by their prompt text, not their id.
    source = read_problem_file()
    rows = []
    for i, task_id in enumerate(("HumanEval/2", "HumanEval/7")):
        p = source[task_id]
        rows.append(
            {
                "task_id": f"Local/{i}",
                "prompt": p.prompt,
                "canonical_solution": p.canonical_solution,
                "test": p.test,
                "entry_point": p.entry_point,
            }
        )
    data = tmp_path / "mine.jsonl.gz"
    with gzip.open(data, "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    section = GateSection(data_file=data, tasks=("Local/1", "Local/0"), min_passed=2)
    assert [p.task_id for p in load_problems(section)] == ["Local/1", "Local/0"]
    sim = sim_factory(NORMAL)
    result = _run_gate(sim.url, section)
    assert (result.passed, result.total) == (2, 2), result.summary()


def test_plain_jsonl_and_count_with_seed(tmp_path: Path) -> None:
    data = tmp_path / "toy.jsonl"
    rows = [
        {"task_id": f"Toy/{i}", "prompt": f"def f{i}(x):\n", "test": "def check(c):\n    assert c(1) == 1\n",
         "entry_point": f"f{i}"}
        for i in range(10)
    ]  # fmt: skip
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pick = [p.task_id for p in load_problems(GateSection(data_file=data, count=3, seed=1))]
    again = [p.task_id for p in load_problems(GateSection(data_file=data, count=3, seed=1))]
    other = [p.task_id for p in load_problems(GateSection(data_file=data, count=3, seed=2))]
    assert pick == again and len(set(pick)) == 3 and pick != other
    toy = read_problem_file(data)["Toy/4"]
    assert RlimitJudge().judge(toy.test_program(toy.prompt + "    return x\n"), timeout_s=10).passed


def test_an_unknown_task_id_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"HumanEval/999") as info:
        load_problems(GateSection(tasks=("HumanEval/0", "HumanEval/999")))
    assert info.value.key == "gate.tasks"
    with pytest.raises(ConfigError, match=r"gate.count"):
        load_problems(GateSection(count=500))


def test_parse_gate_validates_at_load_time(tmp_path: Path) -> None:
    config = tmp_path / "study.toml"

    def parse(data: dict[str, object]) -> GateSection | None:
        section = parse_gate(Table(data, file=config, key="gate"), base_dir=tmp_path)
        check_problems(section, file=str(config))
        return section

    with pytest.raises(ConfigError, match=r"study.toml: gate.tasks: .*HumanEval/999"):
        parse({"tasks": ["HumanEval/999"], "min_passed": 1})
    with pytest.raises(ConfigError, match=r"gate.prompt_template: expected a template containing \{prompt\}"):
        parse({"prompt_template": "Solve it."})
    with pytest.raises(ConfigError, match=r"gate.sandbox"):
        parse({"sandbox": "docker"})
    with pytest.raises(ConfigError, match=r"gate.data_file"):
        parse({"data_file": "missing.jsonl"})
    section = parse({"sandbox": "rlimit", "memory_mb": 512, "prompt_template": "Write {entry_point}:\n{prompt}"})
    assert section is not None and section.sandbox == "rlimit" and section.memory_mb == 512


def test_prompt_template_quotes_the_problem_verbatim() -> None:
    problem = read_problem_file()["HumanEval/0"]
    text = render_prompt(GateSection().prompt_template, problem)
    assert problem.prompt.strip() in text
    assert render_prompt("{entry_point}: {prompt}", problem).startswith("has_close_elements: from typing")


def test_an_unreachable_server_fails_every_problem_without_raising() -> None:
    section = GateSection(tasks=("HumanEval/0", "HumanEval/31"), min_passed=1, request_timeout_s=2)
    result = _run_gate(f"http://127.0.0.1:{free_port()}", section)
    assert (result.passed, result.total) == (0, 2)
    assert all(o.reason.startswith("request failed") for o in result.outcomes)
    with pytest.raises(GateFailed, match=r"0/2 passed \(need 1\)"):
        check_gate(result, section)


def test_an_answer_without_code_is_reported_as_such() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        message = {"content": "<think>still going", "reasoning_content": None}
        return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": "length"}]})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    section = GateSection(tasks=("HumanEval/0",), min_passed=1, max_tokens=64)
    gate = HumanEvalGate(endpoint=Endpoint(base_url="http://sim"), section=section, client=client)
    result = gate.run()
    assert result.outcomes[0].reason.startswith("no code in the answer (cut off at max_tokens=64")
    assert result.outcomes[0].response == "<think>still going"


def test_summary_lists_failures() -> None:
    outcomes = (
        ProblemOutcome(task_id="HumanEval/0", passed=True),
        ProblemOutcome(task_id="HumanEval/10", passed=False, reason="AssertionError\nmore"),
    )
    result = GateResult(passed=1, total=2, outcomes=outcomes, seconds=1.23)
    assert result.summary() == "gate 1/2 passed in 1.2 s; failed HumanEval/10: AssertionError"
