"""The simulated SGLang server process: start-up phases, HTTP API, shutdown and fault injection.

Start-up follows SGLang 0.5.23's ``launch_server`` (and the DDTree branch built on it), including the traps that
broke the seed's shell scripts:

1. *Arguments*: the version's parser, then ``ServerArgs`` resolution. A rejected argument prints
   ``ValueError: ...`` with its traceback and exits 1 before anything loads; warnings are logged.
2. *Loading weights* (port closed): ``Load weight begin.``, the shard progress bar, ``Load weight end.
   elapsed=...``, then the KV pool (``KV Cache is allocated``; an empty pool ends the start-up here).
3. *CUDA-graph capture* (port still closed): ``Capture target verify CUDA graph begin/end``. Graphs that do not
   fit raise ``Capture cuda graph failed: CUDA out of memory`` with SGLang's hint, part-way through.
4. *Warm-up* (port open): ``/v1/models`` already answers 200 (it is NOT a readiness signal) while ``/health``,
   ``/health_generate`` and generation answer 503.
5. *Ready*: ``The server is fired up and ready to roll!``.

``/health`` and ``/health_generate`` then send a one-token request each and answer 200 once the scheduler outputs
anything, as 0.5.23 and 0.5.15 do by default (``/health`` answers 200 without generating when
``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false``); SGLang looks for that output once a second, the simulator
answers when it arrives. SIGTERM shuts down cleanly with exit status 0 (after
``--sim-old-answers-after-sigterm`` seconds of still answering, like an old process that outlives ``systemctl
restart``). Log lines go to stderr, flushed at once, in SGLang's ``[date time TP0] message`` format.
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
from dataclasses import dataclass
from typing import IO, Any

from aiohttp import web

from tuner.sim._answers import count_prompt_tokens, find_problem, humaneval_answer
from tuner.sim._args import ServerArgsError, parse_server_args
from tuner.sim._engine import Engine, EngineRequest, RequestAborted, die_with_cuda_error
from tuner.sim._metrics import prometheus_text
from tuner.sim._model import (
    ServerConfig,
    capture_seconds,
    corrupts_code,
    max_input_tokens,
    warmup_seconds,
    workload_kind,
)
from tuner.sim._startup import (
    READY_LINE,
    capture_begin_lines,
    capture_end_lines,
    capture_failure_text,
    load_begin_lines,
    load_end_lines,
)
from tuner.sim._stream import ResponseText, request_text

__all__ = ["main"]

_DEFAULT_MAX_TOKENS = 256
_HEALTH_TIMEOUT_S = 20.0  # SGLANG_HEALTH_CHECK_TIMEOUT
HEALTH_GENERATION_ENV = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"
_GRAMMAR_KEYS = ("regex", "ebnf", "json_schema", "structural_tag")

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    sys.stderr.write(f"[{stamp} TP0] {message}\n")
    sys.stderr.flush()


def _error(status: int, message: str, kind: str = "BadRequestError") -> web.Response:
    return web.json_response({"object": "error", "message": message, "type": kind, "code": status}, status=status)


def _print_exception(error: BaseException, prefix: str = "") -> None:
    try:
        raise error
    except BaseException:
        sys.stderr.write(prefix + traceback.format_exc())
    sys.stderr.flush()


class SimServer:
    """State machine and HTTP application of one simulated server process."""

    def __init__(self, *, args: argparse.Namespace, cfg: ServerConfig) -> None:
        self._args = args
        self._cfg = cfg
        self._version = args.sglang_version
        self._scale: float = args.sim_time_scale
        seed = args.sim_seed if args.sim_seed is not None else random.SystemRandom().randrange(2**32)
        self._rng = random.Random(seed)
        self._chunk_rng = random.Random(seed ^ 0x5EED)
        self._model_name: str = args.served_model_name or args.model_path
        self._phase = "loading"  # loading -> capturing -> warmup -> warming -> ready -> draining
        self._hang = asyncio.Event()  # never set: handlers awaiting it hang forever (--sim-hang)
        self._terminate = asyncio.Event()
        self._engine: Engine | None = None
        self._created = int(time.time())
        self._corrupt = corrupts_code(cfg)
        self._health_generates = os.environ.get(HEALTH_GENERATION_ENV, "true").lower() not in ("false", "0", "no", "n")
        self._arrived = 0
        self._request_log: IO[str] | None = None

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
        for warning in self._args.resolution_warnings:
            _log(warning)
        if not await self._load_weights():
            _log("Received sigterm while loading weights. Exiting.")
            return 0
        status = await self._capture_graphs()
        if status is not None:
            return status
        app = self._build_app()
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self._args.host, self._args.port, shutdown_timeout=1.0)
        await site.start()
        return await self._serve(runner)

    async def _load_weights(self) -> bool:
        """The weight-loading phase (port closed); False when told to stop meanwhile."""
        for line in load_begin_lines(self._version):
            _log(line)
        load_time = float(self._args.sim_load_time)
        if await self._sleep_or_term(load_time):
            return False
        for line in load_end_lines(self._cfg, load_time=load_time):
            _log(line)
        return True

    async def _capture_graphs(self) -> int | None:
        """CUDA-graph capture (port closed); an exit status when the server ends here, else None."""
        cfg = self._cfg
        self._phase = "capturing"
        failure = capture_failure_text(cfg, self._version)
        if failure is not None and failure.startswith("RuntimeError"):  # the pool, sized before any capture
            _print_exception(RuntimeError(failure.partition(": ")[2]), "[TP0] Scheduler hit an exception: ")
            return 1
        for line in capture_begin_lines(cfg, self._version):
            _log(line)
        capture = capture_seconds(cfg, load_time=float(self._args.sim_load_time))
        if failure is not None:
            # Capture runs out of memory part-way, at the largest batch sizes.
            if await self._sleep_or_term(capture * 0.5):
                return 0
            _print_exception(Exception(failure.partition(": ")[2]), "[TP0] Scheduler hit an exception: ")
            _log("Received sigquit from a child process. It usually means the child failed.")
            return 1
        if await self._sleep_or_term(capture):
            return 0
        for line in capture_end_lines(cfg, self._version, seconds=capture):
            _log(line)
        return None

    async def _serve(self, runner: web.AppRunner) -> int:
        args = self._args
        self._phase = "warmup"
        _log(f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
        self._engine = Engine(
            cfg=self._cfg,
            time_scale=self._scale,
            noise=args.sim_noise,
            rng=self._rng,
            log=_log,
            decode_log_interval=args.decode_log_interval,
            speculative=self._cfg.algorithm is not None,
        )
        engine_task = asyncio.create_task(self._engine.run())
        if await self._sleep_or_term(warmup_seconds(load_time=float(args.sim_load_time))):
            return await self._shutdown(runner, engine_task)
        if args.sim_health_before_ready > 0:
            self._phase = "warming"
            if await self._sleep_or_term(args.sim_health_before_ready):
                return await self._shutdown(runner, engine_task)
        self._phase = "ready"
        _log(READY_LINE)
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
        die_with_cuda_error()

    # -- state ------------------------------------------------------------------------------------------

    def server_args(self) -> dict[str, Any]:
        hidden = ("sglang_version", "resolution_warnings", "ddtree_max_topk")
        info = {k: v for k, v in vars(self._args).items() if not k.startswith("sim_") and k not in hidden}
        # Simulator extras: the environment's top-k cap and the time scale (a real server has neither).
        info["ddtree_max_topk"] = self._args.ddtree_max_topk
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
        if self._phase == "warming" or (self._generating and not self._health_generates):
            return web.Response(text="")
        return await self._health_generate(request)

    async def _health_generate(self, request: web.Request) -> web.Response:
        """SGLang's check: a one-token request; healthy as soon as the scheduler outputs anything."""
        if not self._generating or self._engine is None:
            return web.Response(status=503, text="")
        req = self._engine.submit(prompt_tokens=1, max_tokens=1, log_metrics=False)
        try:
            await asyncio.wait_for(self._engine.next_output(), timeout=_HEALTH_TIMEOUT_S / self._scale)
        except TimeoutError:
            self._engine.cancel(req)
            return web.Response(status=503, text="")
        return web.Response(text="")

    async def _models(self, request: web.Request) -> web.Response:
        entry = {
            "id": self._model_name,
            "object": "model",
            "created": self._created,
            "owned_by": "sglang",
            "root": self._model_name,
            "max_model_len": self._cfg.context_length,
        }
        return web.json_response({"object": "list", "data": [entry]})

    async def _model_info(self, request: web.Request) -> web.Response:
        path = self._args.model_path
        return web.json_response({"model_path": path, "is_generation": True, "tokenizer_path": path})

    async def _server_info(self, request: web.Request) -> web.Response:
        info = self.server_args()
        engine = self._engine
        state: dict[str, Any] = {"last_gen_throughput": 0.0}
        avg = engine.stats.avg_accept_length if engine is not None else None
        if avg is not None and self._cfg.algorithm is not None:
            # Recomputed every --decode-log-interval decode batches: lagging and server-wide.
            state["avg_spec_accept_length"] = avg
        info["internal_states"] = [state]
        info["version"] = self._version.package_version
        info["frontend"] = "python"
        return web.json_response(info)

    async def _flush_cache(self, request: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.\nPlease check backend logs for more details.\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        if not self._args.enable_metrics or self._engine is None:
            return web.Response(status=404, text="404: Not Found")
        e = self._engine
        every_rank = bool(getattr(self._args, "enable_metrics_for_all_schedulers", False))
        text = prometheus_text(
            e.stats,
            model_name=self._model_name,
            tp_ranks=self._cfg.tp_size if every_rank else 1,
            running=e.num_running,
            waiting=e.num_waiting,
            speculative=self._cfg.algorithm is not None,
        )
        return web.Response(text=text, content_type="text/plain")

    # -- generation -------------------------------------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    def _arrival(self) -> float:
        """A generation request arrived: its time, and the ``--sim-stall-after`` stall when it is the Nth (or,
        with ``--sim-stall-every M``, the Nth plus a multiple of M)."""
        self._arrived += 1
        first, every = self._args.sim_stall_after, self._args.sim_stall_every
        since = self._arrived - first if first is not None else -1
        if self._engine is not None and (since == 0 or (every is not None and since > 0 and since % every == 0)):
            self._engine.stall(self._args.sim_stall_s)
        return time.monotonic()

    def _log_request(self, times: _Times, req: EngineRequest) -> None:
        """One ``--sim-request-log`` line: the server's own view of a finished request."""
        if self._args.sim_request_log is None:
            return
        if self._request_log is None:
            self._request_log = open(self._args.sim_request_log, "a", encoding="utf-8")  # noqa: SIM115 - lives with the server
        line = {"arrival": times.arrival, "first_token": times.first, "finish": time.monotonic(),
                "output_tokens": req.generated, "prompt_tokens": req.prompt_tokens}  # fmt: skip
        self._request_log.write(json.dumps(line) + "\n")
        self._request_log.flush()

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        if not self._generating or self._engine is None:
            return _error(503, "The server is not ready yet.", "ServiceUnavailableError")
        times = _Times(arrival=self._arrival())
        parsed = await self._parse_request(request, chat=chat)
        if isinstance(parsed, web.StreamResponse):
            return parsed
        body, text, prompt_tokens, max_tokens = parsed
        problem = find_problem(text)
        answer = humaneval_answer(problem[0], corrupt=self._corrupt) if problem is not None else None
        inline = (not chat) or self._args.sim_thinking == "inline"
        stream = ResponseText(answer=answer, max_tokens=max_tokens, inline_think=inline)
        streaming = bool(body.get("stream"))
        req = self._engine.submit(
            prompt_tokens=prompt_tokens,
            max_tokens=stream.max_tokens,
            workload=workload_kind(text),
            streaming=streaming,
            text=text,
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
        reply = _Reply(chat=chat, rid=rid, finish=finish, model=self._model_name)
        try:
            if streaming:
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                response = await self._stream_response(
                    request, req, stream, reply, usage if include_usage else None, times=times
                )
                self._log_request(times, req)
                return response
            while not req.done:
                await req.next_tokens()
                times.first = times.first or time.monotonic()
        except RequestAborted as aborted:
            return _error(500, str(aborted), "InternalServerError")
        except (asyncio.CancelledError, ConnectionResetError):
            self._engine.cancel(req)
            raise
        self._log_request(times, req)
        return reply.whole(stream, inline=inline, usage=usage)

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
        text = request_text(body, chat=chat)
        if text is None:
            return _error(400, "messages (chat) or prompt (completions) is required.")
        prompt_tokens = count_prompt_tokens(text)
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens", _DEFAULT_MAX_TOKENS))
        if not isinstance(max_tokens, int) or max_tokens < 0:
            return _error(400, "max_tokens must be a non-negative integer.")
        refusal = self._refusal(body, prompt_tokens, max_tokens)
        if refusal is not None:
            _log(f"{refusal}, self.rid='{uuid.uuid4().hex}'")
            return _error(400, refusal)
        return body, text, prompt_tokens, max_tokens

    def _refusal(self, body: dict[str, Any], prompt_tokens: int, max_tokens: int) -> str | None:
        """Why SGLang refuses this request (HTTP 400), or None."""
        if prompt_tokens + max_tokens > self._cfg.context_length:
            return (
                f"Requested token count exceeds the model's maximum context length of {self._cfg.context_length} "
                f"tokens. You requested a total of {prompt_tokens + max_tokens} tokens: {prompt_tokens} tokens from "
                f"the input messages and {max_tokens} tokens for the completion."
            )
        limit = max_input_tokens(self._cfg)
        if prompt_tokens >= limit:
            return (
                f"Input length ({prompt_tokens} tokens) exceeds the maximum allowed length ({limit} tokens). "
                "Use a shorter input or enable --allow-auto-truncate."
            )
        if self._version.refuses_logprob_and_grammar and self._cfg.is_dflash_family:
            # 0.5.15.post1's validate_dflash_request, which the DDTree branch applies to DDTREE as well.
            if body.get("logprobs") or body.get("top_logprobs"):
                return "DFLASH speculative decoding does not support return_logprob yet."
            response_format = body.get("response_format") or {}
            if any(body.get(k) for k in _GRAMMAR_KEYS) or response_format.get("type") in ("json_schema", "json_object"):
                return "DFLASH speculative decoding does not support grammar-constrained decoding yet."
        return None

    async def _stream_response(
        self,
        request: web.Request,
        req: EngineRequest,
        stream: ResponseText,
        reply: _Reply,
        usage: dict[str, int] | None,
        *,
        times: _Times,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        if reply.chat:
            await resp.write(reply.event('role": "assistant", "content', "").encode())
        malformed = float(self._args.sim_malformed_chunks)
        try:
            while not req.done:
                start, end = await req.next_tokens()
                for part in reply.events(*stream.pieces(start, end)):
                    if malformed and self._chunk_rng.random() < malformed:
                        # A truncated event: valid SSE framing around invalid JSON.
                        part = part[: len(part) // 2] + "\n\n"
                    await resp.write(part.encode())
                times.first = times.first or time.monotonic()
        except RequestAborted as aborted:
            await resp.write(reply.error_event(str(aborted), 500).encode())
            await resp.write_eof()
            return resp
        await resp.write(reply.tail(usage).encode())
        await resp.write_eof()
        return resp


@dataclass
class _Times:
    """The server's clock on one request (``--sim-request-log``)."""

    arrival: float
    first: float | None = None


class _Reply:
    """The JSON framing of one response, prepared once so a step's SSE event is a few string joins."""

    def __init__(self, *, chat: bool, rid: str, finish: str, model: str) -> None:
        self.chat = chat
        self._rid = rid
        self._finish = finish
        self._model = model
        head = json.dumps(
            {
                "id": rid,
                "object": "chat.completion.chunk" if chat else "text_completion",
                "created": int(time.time()),
                "model": model,
            }
        )[:-1]
        self._head = head
        if chat:
            self._prefix = f'data: {head}, "choices": [{{"index": 0, "delta": {{"'
            self._suffix = '"}, "logprobs": null, "finish_reason": null}]}\n\n'
        else:
            self._prefix = f'data: {head}, "choices": [{{"index": 0, "text": "'
            self._suffix = '", "logprobs": null, "finish_reason": null}]}\n\n'

    def event(self, field: str, escaped: str) -> str:
        if self.chat:
            return self._prefix + field + '": "' + escaped + self._suffix
        return self._prefix + escaped + self._suffix

    def events(self, reasoning: str, content: str) -> list[str]:
        """The SSE events of one step's JSON-escaped text."""
        parts = []
        if self.chat and reasoning:
            parts.append(self.event("reasoning_content", reasoning))
        if content:
            parts.append(self.event("content", content))
        return parts

    def tail(self, usage: dict[str, int] | None) -> str:
        end_chunk: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": self._finish}
        if self.chat:
            end_chunk["delta"] = {}
        else:
            end_chunk["text"] = ""
        tail = f'data: {self._head}, "choices": [{json.dumps(end_chunk)}]}}\n\n'
        if usage is not None:
            tail += f'data: {self._head}, "choices": [], "usage": {json.dumps(usage)}}}\n\n'
        return tail + "data: [DONE]\n\n"

    @staticmethod
    def error_event(message: str, status: int) -> str:
        """SGLang's ``create_streaming_error_response`` event, then the end of the stream."""
        error = {"object": "error", "message": message, "type": "InternalServerError", "param": None, "code": status}
        return f"data: {json.dumps({'error': error})}\n\ndata: [DONE]\n\n"

    def whole(self, stream: ResponseText, *, inline: bool, usage: dict[str, int]) -> web.Response:
        """A non-streamed completion, as the OpenAI API shapes it."""
        reasoning, content = stream.full_text()
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": None}
            if not inline:
                message["reasoning_content"] = reasoning or None
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": self._finish}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": self._finish}
            obj = "text_completion"
        return web.json_response(
            {
                "id": self._rid,
                "object": obj,
                "created": int(time.time()),
                "model": self._model,
                "choices": [choice],
                "usage": usage,
            }
        )


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Run the simulated server until SIGTERM; return the process exit status (``prog``: see build_parser)."""
    try:
        args = parse_server_args(sys.argv[1:] if argv is None else argv, os.environ, **({"prog": prog} if prog else {}))
    except ServerArgsError as exc:
        _print_exception(exc)
        return 1
    server = SimServer(args=args, cfg=ServerConfig.from_namespace(args))
    return asyncio.run(server.run())
