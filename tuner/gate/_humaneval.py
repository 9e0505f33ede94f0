"""The HumanEval correctness gate: ask the server each problem, extract the code, judge it in the sandbox."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tuner.config import GateSection
from tuner.endpoint import Endpoint
from tuner.errors import GateFailed
from tuner.gate._base import BaseGate, GateResult, ProblemOutcome
from tuner.gate._extract import assemble_program, extract_code
from tuner.gate._problems import Problem, load_problems
from tuner.gate._sandbox import BaseJudge, SandboxLimits, default_judge

__all__ = ["HumanEvalGate", "check_gate", "render_prompt"]

_EVIDENCE_CHARS = 600


def render_prompt(template: str, problem: Problem) -> str:
    # str.replace, not str.format: prompts are Python source full of braces.
    return template.replace("{prompt}", problem.prompt.strip()).replace("{entry_point}", problem.entry_point)


class HumanEvalGate(BaseGate):
    """Asks every selected problem concurrently over one HTTP client and judges answers in a sandbox.

    Problems are loaded once at construction (so a bad config fails before any trial); the model id is
    resolved from ``/v1/models`` on the first run unless the endpoint names one.
    """

    def __init__(
        self,
        *,
        endpoint: Endpoint,
        section: GateSection,
        judge: BaseJudge | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.section = section
        self.problems = load_problems(section)
        self.judge = judge or default_judge(
            kind=section.sandbox,
            limits=SandboxLimits(memory_mb=section.memory_mb, max_processes=section.max_processes),
        )
        self._own_client = client is None
        self.client = client or httpx.Client(
            timeout=httpx.Timeout(section.request_timeout_s, connect=10.0),
            # Enough connections that `concurrency` requests never queue inside the pool.
            limits=httpx.Limits(max_connections=max(section.concurrency, 1)),
        )

    def run(self) -> GateResult:
        started = time.monotonic()
        try:
            self.endpoint = self.endpoint.resolve_model(self.client)
        except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
            reason = f"request failed: cannot resolve the model from /v1/models: {exc}"
            outcomes = tuple(ProblemOutcome(task_id=p.task_id, passed=False, reason=reason) for p in self.problems)
            return GateResult(passed=0, total=len(outcomes), outcomes=outcomes, seconds=time.monotonic() - started)
        workers = min(self.section.concurrency, len(self.problems)) or 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gate") as pool:
            outcomes = tuple(pool.map(self._solve, self.problems))
        return GateResult(
            passed=sum(o.passed for o in outcomes),
            total=len(outcomes),
            outcomes=outcomes,
            seconds=time.monotonic() - started,
        )

    def close(self) -> None:
        if self._own_client:
            self.client.close()

    # ---------------------------------------------------------------------------------------------------

    def _request(self, problem: Problem) -> tuple[str, str, str | None]:
        """Ask one problem; return (content, reasoning, finish_reason)."""
        messages: list[dict[str, str]] = []
        if self.section.system_prompt:
            messages.append({"role": "system", "content": self.section.system_prompt})
        messages.append({"role": "user", "content": render_prompt(self.section.prompt_template, problem)})
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": self.section.temperature,
            "max_tokens": self.section.max_tokens,
            "stream": False,
        }
        response = self.client.post(self.endpoint.url("/v1/chat/completions"), json=body, headers=self.endpoint.headers)
        if response.status_code != 200:
            raise _RequestError(f"HTTP {response.status_code}: {response.text[:300]}")
        data = response.json()
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        content = message.get("content") or ""
        # SGLang's reasoning parser puts thinking in `reasoning_content`; some servers call it `reasoning`.
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        return content, reasoning, choice.get("finish_reason")

    def _solve(self, problem: Problem) -> ProblemOutcome:
        try:
            content, reasoning, finish = self._request(problem)
        except (httpx.HTTPError, _RequestError, ValueError) as exc:
            return ProblemOutcome(task_id=problem.task_id, passed=False, reason=f"request failed: {exc}")
        raw = f"<think>{reasoning}</think>\n{content}" if reasoning else content
        code = extract_code(content)
        if not code.strip():
            why = "no code in the answer"
            if finish == "length":
                why += f" (cut off at max_tokens={self.section.max_tokens}, probably still thinking)"
            return ProblemOutcome(task_id=problem.task_id, passed=False, reason=why, response=raw)
        program = assemble_program(prompt=problem.prompt, code=code, entry_point=problem.entry_point)
        verdict = self.judge.judge(problem.test_program(program), timeout_s=self.section.timeout_s)
        reason = verdict.reason
        if not verdict.passed and finish == "length":
            reason += f" (answer cut off at max_tokens={self.section.max_tokens})"
        return ProblemOutcome(
            task_id=problem.task_id,
            passed=verdict.passed,
            reason="" if verdict.passed else reason,
            code=program,
            response=raw,
        )


class _RequestError(Exception):
    """The server answered, but not with a usable completion."""


def check_gate(result: GateResult, section: GateSection) -> None:
    """Raise :class:`GateFailed` if fewer than ``section.min_passed`` problems passed."""
    if result.passed >= section.min_passed:
        return
    lines = []
    for outcome in result.failures:
        lines.append(f"{outcome.task_id}: {outcome.reason or 'failed'}")
    evidence = "\n".join(lines)
    if len(evidence) > _EVIDENCE_CHARS * 4:
        evidence = evidence[: _EVIDENCE_CHARS * 4] + "\n..."
    raise GateFailed(
        reason=f"correctness gate: {result.passed}/{result.total} passed (need {section.min_passed})",
        evidence=evidence,
    )
