"""The simulated scheduler: continuous batching over a KV pool that can fill up, as SGLang's does.

One :class:`BatchScheduler` decides, step by step, which requests run; the HTTP engine (:mod:`tuner.sim._engine`)
drives it in real time with noise, and :func:`simulate_scenario` drives it in model time without noise (the
search benchmark's ground truth). Followed from SGLang 0.5.23 (``scheduler.py``, ``schedule_batch.py``,
``new_token_ratio_tracker.py``):

* **Admission** (``PrefillAdder``): waiting requests join in arrival order while the running limit allows and the
  pool holds their context plus ``new_token_ratio`` x the tokens they may still generate, on top of the same
  reservation for every running request. The ratio starts at 0.7, decays by 0.001 per decode step to 0.098 and is
  reset whenever the scheduler idles.
* **Retraction** (``retract_decode``): before a decode step every running request needs its context plus the
  step's verify tokens in the pool. When they do not fit, requests are retracted, fewest generated tokens (then
  longest prompt) first, until the rest fit (at least one is kept; one that alone does not fit is aborted), and
  the ratio is re-estimated from what the rest decoded and may still generate. A retracted request keeps its
  output, goes back to the front of the queue and pays the prefill of its prompt and output again when
  readmitted. SGLang logs ``KV cache pool is full. Retract requests.``: a full pool makes a config slower, never a
  crash.
* **Step**: every running request advances by its acceptance length (fractions carry over from a start of its
  own, at least the bonus token per step); the step takes :func:`tuner.sim.step_time_s` at the batch's mean context,
  plus the prefill of the requests admitted before it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from tuner.sim._model import ServerConfig, kv_pool_gb, request_memory_gb, step_time_s, verify_width

__all__ = [
    "PREFILL_S_PER_TOKEN",
    "BatchScheduler",
    "OpenRequestTimes",
    "Retraction",
    "SchedRequest",
    "SimulatedOpen",
    "SimulatedScenario",
    "simulate_open",
    "simulate_scenario",
]

#: Modelled prefill cost per prompt token (seconds): ~10 ms for a 512-token prompt.
PREFILL_S_PER_TOKEN = 2.0e-5
#: Contexts are bucketed for the acceptance/step-time caches; the model is smooth at this granularity.
CTX_BUCKET = 32
INIT_NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO
MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * 0.14  # x SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS
CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION


class SchedRequest:
    """One generation request as the scheduler sees it: token counts and its verify steps."""

    __slots__ = (
        "_frac",
        "generated",
        "max_tokens",
        "needs_prefill",
        "pace",
        "prompt_tokens",
        "verify_steps",
        "workload",
    )

    def __init__(
        self, *, prompt_tokens: int, max_tokens: int, workload: str = "code", pace: float = 1.0, phase: float = 0.5
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.workload = workload
        self.pace = pace
        self.generated = 0
        self.verify_steps = 0
        self.needs_prefill = True
        # Where the request's fractional acceptance starts: real steps accept a varying number of tokens, so
        # requests of one acceptance length need a step more or less; the phase gives them that spread.
        self._frac = phase

    @property
    def context(self) -> int:
        return self.prompt_tokens + self.generated

    @property
    def done(self) -> bool:
        return self.generated >= self.max_tokens

    def advance(self, accepted: float) -> int:
        """One verify step accepting ``accepted`` tokens (fractions carry over); returns the tokens emitted."""
        self._frac += accepted
        k = int(self._frac)
        self._frac -= k
        before = self.generated
        self.generated = min(self.max_tokens, before + k)
        self.verify_steps += 1
        return self.generated - before


@dataclass(frozen=True, kw_only=True)
class Retraction:
    """What one retraction did, for the log line SGLang writes."""

    requests: int
    tokens_gained: int
    ratio_before: float
    ratio_after: float
    aborted: SchedRequest | None = None
    """The last request, aborted because it alone outgrows the pool (its client gets an error)."""

    def log_lines(self) -> list[str]:
        lines = []
        if self.aborted is not None:
            lines.append("retract_decode: aborted last request due to OOM")
        lines.append(
            f"KV cache pool is full. Retract requests. #retracted_reqs: {self.requests}, "
            f"#new_tokens_gained: {self.tokens_gained}, "
            f"#new_token_ratio: {self.ratio_before:.4f} -> {self.ratio_after:.4f}"
        )
        return lines


class BatchScheduler:
    """Waiting queue, running batch and KV pool of one server (see the module docstring)."""

    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.waiting: deque[SchedRequest] = deque()
        self.running: list[SchedRequest] = []
        self.ratio = INIT_NEW_TOKEN_RATIO
        self._pool = kv_pool_gb(cfg)
        self._width = verify_width(cfg)

        @lru_cache(maxsize=16384)
        def memory(tokens: int) -> float:
            return request_memory_gb(cfg, context_tokens=tokens)

        @lru_cache(maxsize=16384)
        def step(n: int, ctx_bucket: int) -> float:
            return step_time_s(cfg, running=n, context_tokens=ctx_bucket * CTX_BUCKET)

        self._memory = memory
        self._step = step

    def submit(self, req: SchedRequest) -> None:
        self.waiting.append(req)

    def cancel(self, req: SchedRequest) -> None:
        """Drop a request whose client went away (frees its slot like an abort)."""
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.running:
            self.running.remove(req)

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    def _reserve(self, req: SchedRequest) -> float:
        ahead = min(req.max_tokens - req.generated, CLIP_MAX_NEW_TOKENS)
        return self._memory(req.context + math.ceil(self.ratio * ahead))

    def admit(self) -> int:
        """Move waiting requests into the batch; returns the tokens they prefill (prompt and output so far)."""
        reserved = sum(self._reserve(r) for r in self.running) if self.waiting else 0.0
        prefill = 0
        while self.waiting and len(self.running) < self.cfg.max_running_requests:
            req = self.waiting[0]
            need = self._reserve(req)
            if self.running and reserved + need > self._pool:
                break
            self.waiting.popleft()
            self.running.append(req)
            reserved += need
            if req.needs_prefill:
                prefill += req.context
                req.needs_prefill = False
        return prefill

    def make_room(self) -> Retraction | None:
        """Retract requests until the next decode step fits in the pool (``None`` when it already does).

        When even the last request does not fit, SGLang aborts it (:attr:`Retraction.aborted`).
        """
        need = sum(self._memory(r.context + self._width) for r in self.running)
        if need <= self._pool:
            self.ratio = max(self.ratio - NEW_TOKEN_RATIO_DECAY, MIN_NEW_TOKEN_RATIO)
            return None
        keep = sorted(self.running, key=lambda r: (r.generated, -r.prompt_tokens), reverse=True)
        retracted: list[SchedRequest] = []
        while len(keep) > 1 and need > self._pool:
            req = keep.pop()
            need -= self._memory(req.context + self._width)
            retracted.append(req)
        aborted = keep.pop() if need > self._pool else None
        for req in reversed(retracted):
            req.needs_prefill = True
            self.waiting.appendleft(req)
        self.running = keep
        before = self.ratio
        decoded = sum(r.generated for r in keep)
        budget = sum(r.max_tokens for r in keep)
        self.ratio = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(keep)) / (budget + 1))
        return Retraction(
            requests=len(retracted),
            tokens_gained=sum(r.context for r in retracted),
            ratio_before=before,
            ratio_after=self.ratio,
            aborted=aborted,
        )

    def batch_tokens(self) -> int:
        """Context tokens the running batch holds."""
        return sum(r.context for r in self.running)

    def step_seconds(self, prefill_tokens: int = 0) -> float:
        """Modelled duration of the next step with the current batch (its admissions' prefill included)."""
        n = len(self.running)
        if n == 0:
            return PREFILL_S_PER_TOKEN * prefill_tokens
        bucket = (self.batch_tokens() // n) // CTX_BUCKET
        return self._step(n, bucket) + PREFILL_S_PER_TOKEN * prefill_tokens

    def advance(
        self, accept: Callable[[SchedRequest], float], emit: Callable[[SchedRequest, int], None] | None = None
    ) -> list[SchedRequest]:
        """Advance every running request by ``accept(request)`` tokens (``emit(request, start)`` after each);
        returns (and drops) the finished ones."""
        finished = []
        for req in self.running:
            start = req.generated
            req.advance(max(1.0, accept(req)))
            if emit is not None:
                emit(req, start)
            if req.done:
                finished.append(req)
        if finished:
            self.running = [r for r in self.running if not r.done]
            if self.idle:  # SGLang resets the ratio whenever its scheduler idles
                self.ratio = INIT_NEW_TOKEN_RATIO
        return finished


def _phase(i: int) -> float:
    """Request ``i``'s starting fraction: spread over [0, 1) as the engine's, which come from the prompts."""
    return ((i + 1) * 0.6180339887498949) % 1.0


@dataclass(frozen=True, kw_only=True)
class SimulatedScenario:
    """A closed-loop scenario run through the scheduler in model time, without noise."""

    seconds: float
    generated: int
    verify_steps: int
    request_seconds: float
    """Sum over steps of (running requests x step time): the denominator of the per-stream pace."""
    retractions: tuple[Retraction, ...]
    failed: str | None = None
    """Why requests failed (an abort, or the ``--sim-crash-above-batch-tokens`` crash); the run stopped there."""


def simulate_scenario(
    cfg: ServerConfig,
    *,
    concurrency: int,
    requests: int,
    prompt_tokens: int,
    output_tokens: int,
    accept: Callable[[int], float],
) -> SimulatedScenario:
    """Run ``requests`` identical requests from ``concurrency`` closed-loop streams through the scheduler.

    ``accept(context_bucket)`` is the acceptance length at a context of ``bucket * CTX_BUCKET`` tokens. A stream
    sends its next request the moment its previous one finishes, so it joins the batch at the next step.
    """
    sched = BatchScheduler(cfg)
    issued = min(concurrency, requests)
    for i in range(issued):
        sched.submit(SchedRequest(prompt_tokens=prompt_tokens, max_tokens=output_tokens, phase=_phase(i)))
    seconds = request_seconds = 0.0
    generated = verify = 0
    retractions: list[Retraction] = []

    def so_far(failed: str | None = None) -> SimulatedScenario:
        return SimulatedScenario(
            seconds=seconds,
            generated=generated,
            verify_steps=verify,
            request_seconds=request_seconds,
            retractions=tuple(retractions),
            failed=failed,
        )

    while not sched.idle:
        prefill = sched.admit()
        if (r := sched.make_room()) is not None:
            retractions.append(r)
            if r.aborted is not None:
                return so_far("a request alone outgrew the KV pool and was aborted")
        if cfg.crash_above_tokens is not None and sched.batch_tokens() > cfg.crash_above_tokens:
            return so_far(f"crashed with {sched.batch_tokens()} tokens in the batch")
        dt = sched.step_seconds(prefill)
        seconds += dt
        request_seconds += dt * len(sched.running)
        for req in sched.advance(lambda q: accept(q.context // CTX_BUCKET)):
            generated += req.generated
            verify += req.verify_steps
            if issued < requests:
                sched.submit(SchedRequest(prompt_tokens=prompt_tokens, max_tokens=output_tokens, phase=_phase(issued)))
                issued += 1
    return so_far()


@dataclass(frozen=True, kw_only=True)
class OpenRequestTimes:
    """One request of an open-loop run, in model seconds from the first arrival."""

    arrival: float
    first_token: float
    finish: float
    tokens: int


@dataclass(frozen=True, kw_only=True)
class SimulatedOpen:
    """An open-loop scenario run through the scheduler in model time, without noise: every request's times."""

    requests: tuple[OpenRequestTimes, ...]
    generated: int
    verify_steps: int
    retractions: tuple[Retraction, ...]
    failed: str | None = None


class _OpenRun:
    """The state of :func:`simulate_open`: the clock, the requests not yet sent, and what each one did."""

    def __init__(self, arrivals: list[float], cap: int | None) -> None:
        self.t = 0.0
        self.pending = deque(enumerate(arrivals))
        self.cap = cap
        self.in_flight = 0
        self.index: dict[SchedRequest, int] = {}
        self.first: dict[int, float] = {}
        self.done: dict[int, tuple[float, int]] = {}
        self.generated = self.verify = 0

    def send_due(self, sched: BatchScheduler, make: Callable[[int], SchedRequest]) -> None:
        """Submit every request whose arrival has come and that the client's cap lets through."""
        while self.pending and self.pending[0][1] <= self.t and (self.cap is None or self.in_flight < self.cap):
            i, _ = self.pending.popleft()
            req = make(i)
            self.index[req] = i
            self.in_flight += 1
            sched.submit(req)

    def record(self, req: SchedRequest, start: int) -> None:
        i = self.index[req]
        if start == 0 and req.generated > 0:
            self.first[i] = self.t
        if req.done:
            self.done[i] = (self.t, req.generated)
            self.generated += req.generated
            self.verify += req.verify_steps
            self.in_flight -= 1


def simulate_open(
    cfg: ServerConfig,
    *,
    arrivals: list[float],
    prompt_tokens: list[int],
    output_tokens: list[int],
    accept: Callable[[int], float],
    max_concurrency: int | None = None,
) -> SimulatedOpen:
    """Run requests that arrive at ``arrivals`` (model seconds, sorted) through the scheduler, as the HTTP engine
    does: an arrival joins the waiting queue and the batch at the next step boundary, waits there while
    ``max_running_requests`` (or the KV pool) is full, and so its TTFT grows with the queue. A client cap
    (``max_concurrency``) holds a due request at the client until one of its requests finishes.
    """
    sched = BatchScheduler(cfg)
    run = _OpenRun(arrivals, max_concurrency)
    retractions: list[Retraction] = []

    def make(i: int) -> SchedRequest:
        return SchedRequest(prompt_tokens=prompt_tokens[i], max_tokens=output_tokens[i], phase=_phase(i))

    def result(failed: str | None = None) -> SimulatedOpen:
        times = tuple(
            OpenRequestTimes(arrival=arrivals[i], first_token=run.first[i], finish=end, tokens=tokens)
            for i, (end, tokens) in sorted(run.done.items())
        )
        return SimulatedOpen(
            requests=times, generated=run.generated, verify_steps=run.verify, retractions=tuple(retractions),
            failed=failed,
        )  # fmt: skip

    while run.pending or not sched.idle:
        run.send_due(sched, make)
        if sched.idle:
            run.t = max(run.t, run.pending[0][1])  # nothing to do until the next arrival
            continue
        prefill = sched.admit()
        if (r := sched.make_room()) is not None:
            retractions.append(r)
            if r.aborted is not None:
                return result("a request alone outgrew the KV pool and was aborted")
        if cfg.crash_above_tokens is not None and sched.batch_tokens() > cfg.crash_above_tokens:
            return result(f"crashed with {sched.batch_tokens()} tokens in the batch")
        run.t += sched.step_seconds(prefill)
        sched.advance(lambda q: accept(q.context // CTX_BUCKET), run.record)
    return result()
