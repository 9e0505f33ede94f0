"""The simulated ``sglang.launch_server``: startup phases, HTTP API, shutdown and fault injection.

Startup mirrors the real server, including the traps that broke the seed's shell scripts:

1. *Loading weights*: the port is still CLOSED; ends with ``Load weight end. elapsed=... s``.
2. *CUDA-graph capture*: the port is open, ``/v1/models`` already answers 200 (it is NOT a readiness signal)
   while ``/health``, ``/health_generate`` and generation answer 503. Ends with
   ``Capture cuda graph end. Time elapsed: ... s``. A startup OOM is raised here.
3. *Ready*: ``The server is fired up and ready to roll!``; ``/health`` 200 and generation works.

SIGTERM shuts down cleanly with exit status 0 (after ``--sim-old-answers-after-sigterm`` seconds of still
answering, like an old process that outlives ``systemctl restart``). Log lines go to stderr, flushed at once,
in SGLang's ``[date time TP0] message`` format, as the real server's logging does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tuner.sim._answers import Answer, count_prompt_tokens, find_problem, humaneval_answer, split_tokens
from tuner.sim._args import parse_server_args
from tuner.sim._engine import Engine, EngineRequest, OutOfMemoryError
from tuner.sim._model import (
    KV_DRAFT_GB_PER_TOKEN,
    KV_TARGET_GB_PER_TOKEN,
    ServerConfig,
    capture_seconds,
    corrupts_code,
    kv_pool_gb,
    startup_failure,
    verify_width,
    workload_kind,
)

__all__ = ["main"]

# Filler vocabulary: plain ASCII words, so filler text never needs JSON escaping.
# fmt: off
_FILLER_WORDS = (
    " alpha", " bravo", " charlie", " delta", " echo", " foxtrot", " golf", " hotel", " india", " juliet",
    " kilo", " lima", " mike", " november", " oscar", " papa", " quebec", " romeo", " sierra", " tango",
    " uniform", " victor", " whiskey", " xray", " yankee", " zulu", " amber", " birch", " cedar", " dune",
    " ember", " fjord", " glade", " harbor", " island", " jasper", " kelp", " lagoon", " meadow", " nectar",
    " orchid", " pebble", " quartz", " river", " summit", " timber", " umber", " valley", " willow", " yew",
)
# fmt: on
_DEFAULT_MAX_TOKENS = 256
_HEALTH_TIMEOUT_S = 20.0

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    sys.stderr.write(f"[{stamp} TP0] {message}\n")
    sys.stderr.flush()


def _error(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    return web.json_response(
        {"object": "error", "message": message, "type": kind, "code": status}, status=status
    )


class _Stream:
    """The text of one response as token slices, with JSON-escaped fragments prepared once per request."""

    __slots__ = ("_content", "_reasoning", "max_tokens", "natural_length", "task_id")

    def __init__(self, *, answer: Answer | None, max_tokens: int, inline_think: bool) -> None:
        self.task_id = answer.task_id if answer is not None else None
        if answer is None:
            self._reasoning: list[str] = []
            self._content: list[str] | None = None  # filler, generated on demand
            self.max_tokens = max_tokens
            self.natural_length = max_tokens  # filler behaves like ignore_eos: exactly max_tokens
            return
        if inline_think:
            # The raw model output: the think block is part of the content text.
            reasoning: list[str] = []
            content = split_tokens(
                "<think>\n" + "".join(answer.reasoning) + "\n</think>\n\n" + "".join(answer.content)
            )
        else:
            reasoning = list(answer.reasoning)
            content = list(answer.content)
        self._reasoning = [json.dumps(t)[1:-1] for t in reasoning]
        self._content = [json.dumps(t)[1:-1] for t in content]
        self.natural_length = len(self._reasoning) + len(self._content)
        self.max_tokens = min(max_tokens, self.natural_length)

    @property
    def reasoning_tokens(self) -> int:
        return len(self._reasoning)

    def pieces(self, start: int, end: int) -> tuple[str, str]:
        """JSON-escaped ``(reasoning, content)`` text of tokens ``[start, end)``."""
        if self._content is None:
            words = _FILLER_WORDS
            n = len(words)
            return "", "".join([words[i % n] for i in range(start, end)])
        r = len(self._reasoning)
        reasoning = "".join(self._reasoning[start:end]) if start < r else ""
        content = "".join(self._content[max(0, start - r) : max(0, end - r)]) if end > r else ""
        return reasoning, content

    def full_text(self) -> tuple[str, str]:
        """Unescaped ``(reasoning, content)`` of the whole response (non-streaming answers)."""
        reasoning, content = self.pieces(0, self.max_tokens)
        return json.loads(f'"{reasoning}"'), json.loads(f'"{content}"')


class SimServer:
    """State machine and HTTP application of one simulated server process."""

    def __init__(self, *, args: argparse.Namespace, cfg: ServerConfig, ddtree_topk: int) -> None:
        self._args = args
        self._cfg = cfg
        self._topk = ddtree_topk
        self._scale: float = args.sim_time_scale
        seed = args.sim_seed if args.sim_seed is not None else random.SystemRandom().randrange(2**32)
        self._rng = random.Random(seed)
        self._chunk_rng = random.Random(seed ^ 0x5EED)
        self._model_name: str = args.served_model_name or args.model_path
        self._phase = "loading"  # loading -> capturing -> warming -> ready -> draining
        self._hang = asyncio.Event()  # never set: handlers awaiting it hang forever (--sim-hang)
        self._terminate = asyncio.Event()
        self._engine: Engine | None = None
        self._created = int(time.time())
        self._corrupt = corrupts_code(cfg)

    # -- lifecycle -------------------------------------------------------------------------------------

    async def _sleep_or_term(self, modelled_seconds: float) -> bool:
        """Sleep for a modelled duration; return True if SIGTERM arrived first."""
        try:
            await asyncio.wait_for(self._terminate.wait(), timeout=max(0.0, modelled_seconds / self._scale))
        except TimeoutError:
            return False
        return True

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._terminate.set)
        _log(f"server_args={self.server_args()!r}")
        cfg = self._cfg
        if cfg.algorithm in ("DFLASH", "DDTREE") and cfg.draft_window is not None:
            try:
                _check_window(cfg)
            except AssertionError:
                traceback.print_exc()
                sys.stderr.flush()
                return 1
        if not await self._load_weights():
            _log("Received sigterm while loading weights. Exiting.")
            return 0
        app = self._build_app()
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self._args.host, self._args.port, shutdown_timeout=1.0)
        await site.start()
        status = await self._capture_graphs()
        if status is not None:
            await runner.cleanup()
            return status
        return await self._serve(runner)

    async def _load_weights(self) -> bool:
        """The weight-loading phase (port closed); False when told to stop meanwhile."""
        _log(f"Load weight begin. avail mem={94.97:.2f} GB")
        load_time = float(self._args.sim_load_time)
        if await self._sleep_or_term(load_time):
            return False
        _log(
            f"Load weight end. elapsed={load_time:.2f} s, type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
            f"avail mem={94.97 - 66.0:.2f} GB, mem usage=66.00 GB."
        )
        pool = kv_pool_gb(self._cfg)
        if pool > 0:
            tokens = int(pool / (KV_TARGET_GB_PER_TOKEN + KV_DRAFT_GB_PER_TOKEN))
            _log(f"KV Cache is allocated. #tokens: {tokens}, KV size: {pool:.2f} GB")
        return True

    async def _capture_graphs(self) -> int | None:
        """CUDA-graph capture (port open, /health 503); an exit status when the server ends here, else None."""
        args, cfg = self._args, self._cfg
        self._phase = "capturing"
        _log(f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
        _log(f"Capture cuda graph begin. This can take up to several minutes. verify width={verify_width(cfg)}")
        capture = capture_seconds(cfg, load_time=float(args.sim_load_time))
        failure = startup_failure(cfg)
        if failure is not None:
            # Startup OOMs surface part-way through capture, after the port already opened.
            if await self._sleep_or_term(capture * 0.5):
                return 0
            _print_startup_failure(failure)
            return 1
        if await self._sleep_or_term(capture):
            return 0
        _log(f"Capture cuda graph end. Time elapsed: {capture:.2f} s. mem usage=2.31 GB. avail mem=8.12 GB.")
        return None

    async def _serve(self, runner: web.AppRunner) -> int:
        args = self._args
        self._engine = Engine(cfg=self._cfg, time_scale=self._scale, noise=args.sim_noise, rng=self._rng)
        engine_task = asyncio.create_task(self._engine.run())
        if args.sim_health_before_ready > 0:
            self._phase = "warming"
            if await self._sleep_or_term(args.sim_health_before_ready):
                return await self._shutdown(runner, engine_task)
        self._phase = "ready"
        _log("The server is fired up and ready to roll!")
        crash_task = None
        if args.sim_crash_after is not None:
            crash_task = asyncio.create_task(self._crash_later(args.sim_crash_after))
        await self._terminate.wait()
        if crash_task is not None:
            crash_task.cancel()
        return await self._shutdown(runner, engine_task)

    async def _shutdown(self, runner: web.AppRunner, engine_task: asyncio.Task[None]) -> int:
        _log("Received sigterm. Shutting down gracefully.")
        linger = float(self._args.sim_old_answers_after_sigterm)
        if linger > 0:
            # The old process keeps serving while it tears down: a readiness probe now sees a stale server.
            self._phase = "draining"
            await asyncio.sleep(linger / self._scale)
        engine_task.cancel()
        await runner.cleanup()
        _log("Server exited.")
        return 0

    async def _crash_later(self, modelled_seconds: float) -> None:
        await asyncio.sleep(modelled_seconds / self._scale)
        try:
            raise RuntimeError(
                "CUDA error: an illegal memory access was encountered\n"
                "CUDA kernel errors might be asynchronously reported at some other API call, so the "
                "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
            )
        except RuntimeError:
            sys.stderr.write("[TP0] Scheduler hit an exception: " + traceback.format_exc())
        sys.stderr.write("Received sigquit from a child process. It usually means the child failed.\n")
        sys.stderr.flush()
        os._exit(1)

    # -- state ------------------------------------------------------------------------------------------

    def server_args(self) -> dict[str, Any]:
        info = {k: v for k, v in vars(self._args).items() if not k.startswith("sim_")}
        info["ddtree_max_topk"] = self._topk
        info["sim_time_scale"] = self._scale
        return info

    @property
    def _generating(self) -> bool:
        return self._phase in ("ready", "draining") and self._engine is not None

    # -- HTTP -------------------------------------------------------------------------------------------

    def _build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._hang_middleware])
        r = app.router
        r.add_get("/health", self._health)
        r.add_get("/health_generate", self._health_generate)
        r.add_get("/v1/models", self._models)
        r.add_get("/server_info", self._server_info)
        r.add_get("/get_server_info", self._server_info)
        r.add_get("/model_info", self._model_info)
        r.add_get("/get_model_info", self._model_info)
        r.add_get("/flush_cache", self._flush_cache)
        r.add_post("/flush_cache", self._flush_cache)
        r.add_get("/metrics", self._metrics)
        r.add_post("/v1/chat/completions", self._chat)
        r.add_post("/v1/completions", self._completions)
        return app

    @web.middleware
    async def _hang_middleware(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        if self._args.sim_hang and self._phase in ("ready", "warming", "draining"):
            await self._hang.wait()  # never set
        return await handler(request)

    async def _health(self, request: web.Request) -> web.Response:
        if self._phase in ("ready", "warming", "draining"):
            return web.Response(text="")
        return web.Response(status=503, text="")

    async def _health_generate(self, request: web.Request) -> web.Response:
        if not self._generating or self._engine is None:
            return web.Response(status=503, text="")
        req = self._engine.submit(prompt_tokens=1, max_tokens=1)
        try:
            while not req.done:
                await asyncio.wait_for(req.next_tokens(), timeout=_HEALTH_TIMEOUT_S)
        except TimeoutError:
            self._engine.cancel(req)
            return web.Response(status=503, text="")
        return web.Response(text="")

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self._model_name,
                        "object": "model",
                        "created": self._created,
                        "owned_by": "sglang",
                        "root": self._model_name,
                        "max_model_len": self._cfg.context_length,
                    }
                ],
            }
        )

    async def _model_info(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "model_path": self._args.model_path,
                "is_generation": True,
                "tokenizer_path": self._args.model_path,
            }
        )

    async def _server_info(self, request: web.Request) -> web.Response:
        info = self.server_args()
        engine = self._engine
        accept = engine.avg_accept_length if engine is not None else 0.0
        # SGLang's scheduler keeps these two counters behind the average; exposing them lets a client take
        # the exact acceptance length of any window as a ratio of deltas.
        info["internal_states"] = [
            {
                "avg_spec_accept_length": accept,
                "spec_num_total_accepted_tokens": engine.total_accepted if engine is not None else 0,
                "spec_num_total_forward_ct": engine.total_verify_steps if engine is not None else 0,
                "last_gen_throughput": 0.0,
            }
        ]
        info["version"] = "0.5.6-sim"
        return web.json_response(info)

    async def _flush_cache(self, request: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.\nPlease check backend logs for more details.\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        if not self._args.enable_metrics:
            return web.Response(status=404, text="404: Not Found")
        e = self._engine
        accept = e.avg_accept_length if e is not None else 0.0
        width = verify_width(self._cfg)
        # Accepted draft tokens per drafted token (the bonus token is not a draft).
        rate = min(1.0, (accept - 1.0) / max(1, width - 1)) if accept > 0 else 0.0
        label = f'{{model_name="{self._model_name}"}}'
        lines = [
            "# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.",
            "# TYPE sglang:spec_accept_length gauge",
            f"sglang:spec_accept_length{label} {accept}",
            "# HELP sglang:spec_accept_rate The average acceptance rate of speculative decoding.",
            "# TYPE sglang:spec_accept_rate gauge",
            f"sglang:spec_accept_rate{label} {max(0.0, rate)}",
            "# HELP sglang:num_running_reqs The number of running requests.",
            "# TYPE sglang:num_running_reqs gauge",
            f"sglang:num_running_reqs{label} {e.num_running if e else 0}",
            "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.",
            "# TYPE sglang:num_queue_reqs gauge",
            f"sglang:num_queue_reqs{label} {e.num_waiting if e else 0}",
            "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE sglang:prompt_tokens_total counter",
            f"sglang:prompt_tokens_total{label} {e.total_prompt if e else 0}",
            "# HELP sglang:generation_tokens_total Number of generation tokens processed.",
            "# TYPE sglang:generation_tokens_total counter",
            f"sglang:generation_tokens_total{label} {e.total_generated if e else 0}",
        ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    # -- generation -------------------------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        if not self._generating or self._engine is None:
            return _error(503, "The server is not ready yet.", "ServiceUnavailableError")
        parsed = await self._parse_request(request, chat=chat)
        if isinstance(parsed, web.StreamResponse):
            return parsed
        body, text, prompt_tokens, max_tokens = parsed
        problem = find_problem(text)
        answer = humaneval_answer(problem[0], corrupt=self._corrupt) if problem is not None else None
        inline = (not chat) or self._args.sim_thinking == "inline"
        stream = _Stream(answer=answer, max_tokens=max_tokens, inline_think=inline)
        req = self._engine.submit(
            prompt_tokens=prompt_tokens, max_tokens=stream.max_tokens, workload=workload_kind(text)
        )
        # Filler is generated like ignore_eos (always cut by max_tokens); an answer stops on its own.
        finish = "length" if answer is None or stream.natural_length > max_tokens else "stop"
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": stream.max_tokens,
            "total_tokens": prompt_tokens + stream.max_tokens,
        }
        if chat and stream.reasoning_tokens and not inline:
            usage["reasoning_tokens"] = min(stream.reasoning_tokens, stream.max_tokens)
        try:
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return await self._stream_response(
                    request,
                    req,
                    stream,
                    chat=chat,
                    rid=rid,
                    finish=finish,
                    usage=usage if include_usage else None,
                )
            while not req.done:
                await req.next_tokens()
        except (asyncio.CancelledError, ConnectionResetError):
            self._engine.cancel(req)
            raise
        return self._whole_response(stream, chat=chat, inline=inline, rid=rid, finish=finish, usage=usage)

    async def _parse_request(
        self, request: web.Request, *, chat: bool
    ) -> web.StreamResponse | tuple[dict[str, Any], str, int, int]:
        """(body, prompt text, prompt tokens, max tokens), or the error response the real server gives."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "Request body is not valid JSON.")
        if not isinstance(body, dict):
            return _error(400, "Request body must be a JSON object.")
        text = _request_text(body, chat=chat)
        if text is None:
            return _error(400, "messages (chat) or prompt (completions) is required.")
        prompt_tokens = count_prompt_tokens(text)
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens", _DEFAULT_MAX_TOKENS))
        if not isinstance(max_tokens, int) or max_tokens < 0:
            return _error(400, "max_tokens must be a non-negative integer.")
        if prompt_tokens + max_tokens > self._cfg.context_length:
            return _error(
                400,
                f"Requested token count exceeds the model's maximum context length of "
                f"{self._cfg.context_length} tokens. You requested a total of {prompt_tokens + max_tokens} "
                f"tokens: {prompt_tokens} tokens from the input messages and {max_tokens} tokens for the "
                "completion.",
            )
        return body, text, prompt_tokens, max_tokens

    def _whole_response(
        self, stream: _Stream, *, chat: bool, inline: bool, rid: str, finish: str, usage: dict[str, int]
    ) -> web.Response:
        """A non-streamed completion, as the OpenAI API shapes it."""
        reasoning, content = stream.full_text()
        if chat:
            message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": None}
            if not inline:
                message["reasoning_content"] = reasoning or None
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": finish}
            obj = "text_completion"
        return web.json_response(
            {
                "id": rid,
                "object": obj,
                "created": int(time.time()),
                "model": self._model_name,
                "choices": [choice],
                "usage": usage,
            }
        )

    async def _stream_response(
        self,
        request: web.Request,
        req: EngineRequest,
        stream: _Stream,
        *,
        chat: bool,
        rid: str,
        finish: str,
        usage: dict[str, int] | None,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        head = json.dumps(
            {
                "id": rid,
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()),
                "model": self._model_name,
            }
        )[:-1]
        if chat:
            # Per-event fragments are prepared once; a step's event is prefix + escaped text + suffix.
            prefix = f'data: {head}, "choices": [{{"index": 0, "delta": {{"'
            suffix = '"}, "logprobs": null, "finish_reason": null}]}\n\n'
            await resp.write((prefix + 'role": "assistant", "content": "' + suffix).encode())
        else:
            prefix = f'data: {head}, "choices": [{{"index": 0, "text": "'
            suffix = '", "logprobs": null, "finish_reason": null}]}\n\n'
        malformed = float(self._args.sim_malformed_chunks)
        bad_rng = self._chunk_rng
        while not req.done:
            start, end = await req.next_tokens()
            reasoning, content = stream.pieces(start, end)
            parts = []
            if chat:
                if reasoning:
                    parts.append(prefix + 'reasoning_content": "' + reasoning + suffix)
                if content:
                    parts.append(prefix + 'content": "' + content + suffix)
            elif content:
                parts.append(prefix + content + suffix)
            for part in parts:
                if malformed and bad_rng.random() < malformed:
                    # A truncated event: valid SSE framing around invalid JSON.
                    part = part[: len(part) // 2] + "\n\n"
                await resp.write(part.encode())
        end_chunk: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish}
        if chat:
            end_chunk["delta"] = {}
        else:
            end_chunk["text"] = ""
        tail = f'data: {head}, "choices": [{json.dumps(end_chunk)}]}}\n\n'
        if usage is not None:
            tail += f'data: {head}, "choices": [], "usage": {json.dumps(usage)}}}\n\n'
        tail += "data: [DONE]\n\n"
        await resp.write(tail.encode())
        await resp.write_eof()
        return resp


def _request_text(body: dict[str, Any], *, chat: bool) -> str | None:
    """All prompt text of a request (message contents, or the completion prompt)."""
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        texts: list[str] = []
        for m in messages:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):  # OpenAI content parts
                texts.extend(p.get("text", "") for p in content if isinstance(p, dict))
        return "\n".join(texts)
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        return "\n".join(prompt)
    return None


def _check_window(cfg: ServerConfig) -> None:
    assert cfg.draft_window is not None
    assert cfg.draft_window >= cfg.block_size, (
        f"speculative_dflash_draft_window_size ({cfg.draft_window}) must be >= "
        f"speculative_dflash_block_size ({cfg.block_size})"
    )


def _print_startup_failure(failure: str) -> None:
    kind, _, message = failure.partition(": ")
    error: Exception
    error = OutOfMemoryError(message) if kind == "torch.OutOfMemoryError" else RuntimeError(message)
    try:
        raise error
    except Exception:
        sys.stderr.write("[TP0] Scheduler hit an exception: " + traceback.format_exc())
    sys.stderr.flush()


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Run the simulated server until SIGTERM; return the process exit status (``prog``: see build_parser)."""
    args, topk = parse_server_args(argv, os.environ, **({"prog": prog} if prog else {}))
    cfg = ServerConfig.from_namespace(args, ddtree_topk=topk)
    server = SimServer(args=args, cfg=cfg, ddtree_topk=topk)
    return asyncio.run(server.run())
