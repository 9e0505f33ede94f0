"""Continuous-batching decode engine of the simulated server.

One asyncio task runs the engine loop. Each iteration is one speculative-decoding step: it admits waiting
requests up to ``--max-running-requests``, checks that the running requests fit in the KV pool (if not, the
process dies with a CUDA OOM traceback, as a real server does mid-benchmark), sleeps for the modelled step
time, and then advances every running request by its accepted tokens. Acceptance is fractional in the model,
so each request accumulates the fraction and emits whole tokens; every step yields at least the bonus token.

The engine deals in token *counts* only. Each request gets one wake-up per step carrying ``(start, end)``
indices; the HTTP handler turns them into one SSE event with precomputed JSON fragments, which keeps the
per-event CPU cost low enough for 64+ concurrent streams.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import sys
import traceback
from collections import deque
from functools import lru_cache

from tuner.sim._model import (
    ServerConfig,
    acceptance_length,
    kv_pool_gb,
    request_memory_gb,
    step_time_s,
)

__all__ = ["Engine", "EngineRequest", "OutOfMemoryError"]

#: Modelled prefill cost per prompt token (seconds): ~10 ms for a 512-token prompt.
PREFILL_S_PER_TOKEN = 2.0e-5
#: Correlation time of the slowly varying server-wide speed factor (modelled seconds).
SERVER_NOISE_TAU_S = 5.0
#: Contexts are bucketed for the acceptance/step-time caches; the model is smooth at this granularity.
_CTX_BUCKET = 32


class EngineRequest:
    """One generation request as the engine sees it: counts, pace and a mailbox for its handler."""

    __slots__ = ("_done", "_frac", "_mail", "generated", "max_tokens", "pace", "prompt_tokens", "workload")

    def __init__(self, *, prompt_tokens: int, max_tokens: int, pace: float, workload: str = "code") -> None:
        self.prompt_tokens = prompt_tokens
        self.workload = workload
        self.max_tokens = max_tokens
        self.pace = pace
        self.generated = 0
        self._frac = 0.0
        self._mail: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self._done = False

    @property
    def context(self) -> int:
        return self.prompt_tokens + self.generated

    @property
    def done(self) -> bool:
        return self._done

    async def next_tokens(self) -> tuple[int, int]:
        """Wait for the next step's ``(start, end)`` token indices; ``end == max_tokens`` at the end."""
        return await self._mail.get()

    def _advance(self, accepted: float) -> int:
        self._frac += accepted
        k = int(self._frac)
        self._frac -= k
        start = self.generated
        end = min(self.max_tokens, start + k)
        self.generated = end
        if end >= self.max_tokens:
            self._done = True
        self._mail.put_nowait((start, end))
        return k


class Engine:
    """The asyncio continuous-batching loop plus the cumulative counters ``/server_info`` reports."""

    def __init__(
        self,
        *,
        cfg: ServerConfig,
        time_scale: float,
        noise: float,
        rng: random.Random,
    ) -> None:
        self._cfg = cfg
        self._time_scale = time_scale
        self._noise = noise
        self._rng = rng
        self._waiting: deque[EngineRequest] = deque()
        self._running: list[EngineRequest] = []
        self._wake = asyncio.Event()
        self._server_x = 0.0  # log of the server-wide speed factor (an Ornstein-Uhlenbeck process)
        self._kv_pool = kv_pool_gb(cfg)
        self.total_accepted = 0
        self.total_verify_steps = 0
        self.total_generated = 0
        self.total_prompt = 0

        @lru_cache(maxsize=4096)
        def accept(ctx_bucket: int, workload: str) -> float:
            return acceptance_length(cfg, context_tokens=ctx_bucket * _CTX_BUCKET, workload=workload)

        @lru_cache(maxsize=16384)
        def step(n: int, ctx_bucket: int) -> float:
            return step_time_s(cfg, running=n, context_tokens=ctx_bucket * _CTX_BUCKET)

        @lru_cache(maxsize=4096)
        def memory(ctx_bucket: int) -> float:
            return request_memory_gb(cfg, context_tokens=ctx_bucket * _CTX_BUCKET)

        self._accept = accept
        self._step = step
        self._memory = memory

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def avg_accept_length(self) -> float:
        """Cumulative since boot: accepted tokens (bonus included) per request verify step."""
        if self.total_verify_steps == 0:
            return 0.0
        return self.total_accepted / self.total_verify_steps

    def submit(self, *, prompt_tokens: int, max_tokens: int, workload: str = "code") -> EngineRequest:
        """Queue a request; it joins the running batch at the next step boundary."""
        sigma = self._noise / math.sqrt(2.0)
        pace = max(0.5, self._rng.gauss(1.0, sigma)) if sigma > 0 else 1.0
        req = EngineRequest(prompt_tokens=prompt_tokens, max_tokens=max(0, max_tokens), pace=pace, workload=workload)
        self.total_prompt += prompt_tokens
        if req.max_tokens == 0:
            req._done = True
            req._mail.put_nowait((0, 0))
            return req
        self._waiting.append(req)
        self._wake.set()
        return req

    def cancel(self, req: EngineRequest) -> None:
        """Drop a request whose client went away (frees its slot like an abort)."""
        req._done = True
        if req in self._waiting:
            self._waiting.remove(req)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        cfg = self._cfg
        deadline = loop.time()
        sigma = self._noise / math.sqrt(2.0)
        while True:
            self._running = [r for r in self._running if not r.done]
            if not self._running and not self._waiting:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
            prefill = 0.0
            while self._waiting and len(self._running) < cfg.max_running_requests:
                req = self._waiting.popleft()
                if req.done:
                    continue
                self._running.append(req)
                prefill += PREFILL_S_PER_TOKEN * req.prompt_tokens
            running = self._running
            n = len(running)
            if n == 0:
                continue
            ctx_total = 0
            memory = 0.0
            for r in running:
                bucket = r.context // _CTX_BUCKET
                ctx_total += r.context
                memory += self._memory(bucket)
            if memory > self._kv_pool:
                _die_oom(memory - self._kv_pool, n)
            model_dt = self._step(n, (ctx_total // n) // _CTX_BUCKET) + prefill
            if sigma > 0:
                # Slowly varying server-wide factor: consecutive benchmark runs differ by ~noise.
                decay = math.exp(-model_dt / SERVER_NOISE_TAU_S)
                self._server_x = self._server_x * decay + sigma * math.sqrt(
                    1.0 - decay * decay
                ) * self._rng.gauss(0.0, 1.0)
            dt = model_dt * math.exp(-self._server_x) / self._time_scale
            deadline = max(deadline + dt, loop.time())
            await asyncio.sleep(deadline - loop.time())
            accepted_total = 0
            generated_total = 0
            for r in running:
                if r.done:  # cancelled while we slept
                    continue
                before = r.generated
                accepted = max(1.0, self._accept(r.context // _CTX_BUCKET, r.workload) * r.pace)
                accepted_total += r._advance(accepted)
                generated_total += r.generated - before
            self.total_accepted += accepted_total
            self.total_verify_steps += n
            self.total_generated += generated_total


def _die_oom(excess_gb: float, running: int) -> None:
    """Print a CUDA OOM traceback like a scheduler dying mid-batch, then kill the whole process at once.

    ``os._exit`` (not an exception) is deliberate: a real scheduler crash takes the server down without
    finishing open HTTP streams, and clients must see their streams cut.
    """
    try:
        raise OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {excess_gb + 0.25:.2f} GiB. GPU 0 has a total capacity "
            f"of 94.97 GiB of which 0.19 GiB is free. Process has 94.71 GiB memory in use "
            f"({running} running requests in the speculative verify batch)."
        )
    except Exception:
        sys.stderr.write("[TP0] Scheduler hit an exception: " + traceback.format_exc())
    sys.stderr.write("Received sigquit from a child process. It usually means the child failed.\n")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(1)


class OutOfMemoryError(RuntimeError):
    """Stand-in for ``torch.OutOfMemoryError`` (its traceback line reads ``torch.OutOfMemoryError: ...``)."""


OutOfMemoryError.__module__ = "torch"
