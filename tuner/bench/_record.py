"""One streamed completion, whatever HTTP library carried it: the request body, the record of what happened and
its timings, and the accounting of the stream's SSE events. No HTTP library is imported here: the clients
(:mod:`tuner.bench._client`) hand it raw bytes and their arrival times.

Timing model
------------
* ``t_start`` is taken just before the request is sent; ``t_first`` at the first event that carries output
  (content, ``reasoning_content``, completion text, or a growing per-chunk usage count); ``t_last`` at the
  last such event. TTFT = ``t_first - t_start``. All times are ``time.monotonic()``, one clock for every
  client process. ``t_sent`` is when the body was written (the HTTP library's trace hook) and ``t_due`` (set by
  the load generator) when the request should have gone out: ``t_sent - t_due`` is the client's own start
  delay, which the client-bound check reads.
* Open loop (a scenario with an arrival schedule): ``t_scheduled`` is the request's arrival, and TTFT and
  end-to-end latency count from it, not from ``t_start``: a request the client sent late, or that waited for a
  ``max_concurrency`` slot, waited as a user would, and leaving that out hides the queue (coordinated omission).
* TPOT (time per output token) = ``(e2e - TTFT) / (output tokens - 1)`` per request: the pace after the first
  token, whatever the burst size of the events that delivered it.
* A speculative-decoding server emits one event per decode step carrying *several* tokens. Each event's
  token count comes from per-chunk usage when the server sends it (``stream_options.continuous_usage_stats``,
  which SGLang and vLLM honour), otherwise the final ``usage.completion_tokens`` is apportioned over the
  events: one token each, the rest in proportion to the words of their text (exact for the simulator, whose
  tokens are words; close for prose, where a BPE token is about 0.75 words, and the ratio is what matters).
  The gap before an event with ``k`` tokens contributes ``k`` inter-token
  latencies of ``gap / k`` each (as SGLang's and vLLM's own benchmark clients do), so ITL percentiles are per
  token, not per event.
* Decode tok/s = tokens after the first event / (``t_last - t_first``). With one token in the first event this
  is the usual ``(tokens - 1) / (t_last - t_first)``; a speculative server's first event already carries a
  whole accepted block, and counting those tokens against the decode interval would overstate the pace.

Failure model
-------------
A request succeeds only when its stream completes: HTTP 200, every chunk valid JSON, no ``error`` object,
and a ``finish_reason`` (other than ``abort``) or ``data: [DONE]`` before the connection closes, with at least
one output token. Anything else is a failure with a short ``error_kind`` (used to summarise many failures)
and a detailed ``error``: a :class:`StreamError` names what the stream itself got wrong, and
:func:`tuner.bench._client.classify` names what the connection did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from orjson import loads as _loads

from tuner.bench._sse import SSEDecoder

__all__ = ["RequestRecord", "RequestSpec", "StreamError", "StreamEvents", "build_body", "recount"]


@dataclass(frozen=True, kw_only=True)
class RequestSpec:
    """What one benchmark request asks for."""

    index: int
    prompt: str
    max_tokens: int
    messages: list[dict[str, str]] | None = None
    """A whole chat (non-random workloads); ``prompt`` is then its text, for the completions API."""


@dataclass(kw_only=True)
class RequestRecord:
    """What happened to one request; times are ``time.monotonic()`` seconds.

    ``time.monotonic`` (CLOCK_MONOTONIC on Linux) is one clock for every process on the machine, so records
    from several client processes share one time axis (see :mod:`tuner.bench._workers`).
    """

    index: int
    t_start: float
    t_end: float = 0.0
    t_first: float | None = None
    t_last: float | None = None
    output_tokens: int = 0
    tokens_from_usage: bool = False
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    event_times: list[float] = field(default_factory=list)
    """Arrival time of every output-bearing event."""
    event_tokens: list[int] = field(default_factory=list)
    """Tokens attributed to each output-bearing event (same length as ``event_times``)."""
    error: str | None = None
    error_kind: str | None = None
    text: str | None = None
    """The generated text, kept only when asked (``keep_text``: to count its tokens on the server)."""
    t_due: float | None = None
    """When the load generator should have sent the request (released, and its stream free)."""
    t_sent: float | None = None
    """When the request body was written to the connection (the HTTP library's trace hook)."""
    t_scheduled: float | None = None
    """Open loop: when the request arrived by the schedule; its latencies count from here."""

    @property
    def start_delay_s(self) -> float | None:
        """``t_sent - t_due``: the client's own delay in sending, the sign of a saturated event loop."""
        if self.t_due is None or self.t_sent is None:
            return None
        return max(0.0, self.t_sent - self.t_due)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def t_origin(self) -> float:
        """Where latencies count from: the scheduled arrival (open loop), else the send."""
        return self.t_start if self.t_scheduled is None else self.t_scheduled

    @property
    def ttft_s(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_origin

    @property
    def e2e_s(self) -> float:
        return self.t_end - self.t_origin

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: ``(e2e - TTFT) / (output_tokens - 1)`` (None: under 2 tokens)."""
        if self.t_first is None or self.output_tokens < 2:
            return None
        return (self.t_end - self.t_first) / (self.output_tokens - 1)

    @property
    def decode_tok_s(self) -> float | None:
        """Tokens after the first event over the time from the first to the last event (None if undefined)."""
        if self.t_first is None or self.t_last is None or len(self.event_tokens) < 2:
            return None
        span = self.t_last - self.t_first
        if span <= 0:
            return None
        return (self.output_tokens - self.event_tokens[0]) / span

    def itls(self) -> list[float]:
        """Per-token inter-token latencies: the gap before an event of ``k`` tokens counts ``k`` x gap/k."""
        out: list[float] = []
        times, toks = self.event_times, self.event_tokens
        for i in range(1, len(times)):
            k = toks[i]
            if k <= 0:
                continue
            gap = (times[i] - times[i - 1]) / k
            out.extend([gap] * k)
        return out


class StreamError(Exception):
    """A stream that cannot count as a completed request."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


def build_body(
    *,
    api: str,
    model: str,
    prompt: str,
    max_tokens: int,
    seed: int | None = None,
    messages: list[dict[str, str]] | None = None,
) -> bytes:
    """The JSON body for one streamed request that generates exactly ``max_tokens`` tokens.

    ``ignore_eos`` and ``min_tokens`` are SGLang (and vLLM) extensions that stop the model from ending early,
    so every config does the same amount of work; ``continuous_usage_stats`` asks for a token count in every
    chunk, which attributes a multi-token event exactly. Servers that do not know these fields ignore them.
    """
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if seed is not None:
        body["seed"] = seed
    if api == "chat":
        body["messages"] = messages or [{"role": "user", "content": prompt}]
    elif api == "completions":
        body["prompt"] = prompt
    else:
        raise ValueError(f"api must be 'chat' or 'completions', got {api!r}")
    return json.dumps(body, separators=(",", ":")).encode()


def _parse(data: bytes) -> dict[str, Any]:
    """One event's JSON object, or :class:`StreamError` (malformed JSON, not an object, an ``error`` object)."""
    try:
        obj = _loads(data)
    except ValueError:
        raise StreamError("malformed chunk", data[:200].decode("utf-8", "replace")) from None
    if type(obj) is not dict:
        raise StreamError("malformed chunk", data[:200].decode("utf-8", "replace"))
    if "error" in obj:
        raise StreamError("server error in stream", json.dumps(obj["error"])[:300])
    return obj


class StreamEvents:
    """The accounting of one stream's SSE events (see the module docstring's timing model).

    :meth:`feed` takes raw bytes and their arrival time; it records, per output-bearing event, the time, the
    per-chunk cumulative token count (or None) and its weight for apportioning: the words of its text, or, for an
    event with a per-chunk count, its token delta. Words are counted only when the count is missing: splitting
    every token's text was a measurable share of the client's per-token CPU.
    """

    __slots__ = ("_chat", "_decoder", "cums", "done", "finish", "kept", "last_cum", "prompt_tokens", "times",
                 "usage_final", "weights")  # fmt: skip

    def __init__(self, *, chat: bool, keep_text: bool = False) -> None:
        self._chat = chat
        self.kept: list[str] | None = [] if keep_text else None
        self._decoder = SSEDecoder()
        self.times: list[float] = []
        self.weights: list[int] = []
        self.cums: list[int | None] = []
        self.usage_final: int | None = None
        self.prompt_tokens: int | None = None
        self.last_cum = 0  # per-chunk usage count at the last output event
        self.done = False
        self.finish: str | None = None

    def feed(self, chunk: bytes, now: float) -> None:
        for data in self._decoder.feed(chunk):
            self._event(data, now)

    def close(self) -> None:
        for data in self._decoder.close():
            if data == b"[DONE]":
                self.done = True
            # A trailing non-[DONE] event without its blank line is rare; its tokens are in usage.

    def _event(self, data: bytes, now: float) -> None:
        if self.done:
            return  # anything after [DONE] is ignored, as OpenAI clients do
        if data == b"[DONE]":
            self.done = True
            return
        obj = _parse(data)
        usage = obj.get("usage")
        cum = self._usage(usage) if usage else None
        choices = obj.get("choices")
        if not choices:
            return
        has_text, weight = self._choice(choices[0], count_words=cum is None)
        if cum is not None:
            weight = max(0, cum - self.last_cum)
        if has_text or (cum is not None and cum > self.last_cum):
            self.times.append(now)
            self.weights.append(weight)
            self.cums.append(cum)
            if cum is not None:
                self.last_cum = cum

    def _usage(self, usage: dict[str, Any]) -> int | None:
        cum = usage.get("completion_tokens")
        if cum is not None:
            self.usage_final = cum
            if self.prompt_tokens is None:
                self.prompt_tokens = usage.get("prompt_tokens")
        return cum

    def _choice(self, choice: dict[str, Any], *, count_words: bool) -> tuple[bool, int]:
        """Whether the choice carries output text, and its words (0 unless ``count_words``)."""
        fr = choice.get("finish_reason")
        if fr:
            self.finish = fr
        if not self._chat:
            t = choice.get("text")
            if t and self.kept is not None:
                self.kept.append(t)
            return (True, len(t.split()) if count_words else 0) if t else (False, 0)
        delta = choice.get("delta")
        if not delta:
            return False, 0
        # Reasoning is generated output too; a thinking model spends most of its tokens there. ("reasoning" is
        # vLLM's newer spelling.)
        c = delta.get("content")
        if c and self.kept is not None:
            self.kept.append(c)
        r = delta.get("reasoning_content") or delta.get("reasoning")
        if not (c or r):
            return False, 0
        if not count_words:
            return True, 0
        return True, (len(c.split()) if c else 0) + (len(r.split()) if r else 0)

    def check_complete(self) -> None:
        """Raise :class:`StreamError` unless the stream ended properly (see the failure model)."""
        if not self.done and self.finish is None:
            raise StreamError("incomplete stream", "the connection closed without finish_reason or [DONE]")
        if self.finish == "abort":
            raise StreamError("aborted by server", "finish_reason 'abort'")

    def fill(self, rec: RequestRecord) -> None:
        """Put the stream's finish reason, prompt tokens and per-event attribution into ``rec``."""
        rec.finish_reason = self.finish
        rec.prompt_tokens = self.prompt_tokens
        if self.kept is not None:
            rec.text = "".join(self.kept)
        _attribute(rec, times=self.times, weights=self.weights, cums=self.cums, usage_final=self.usage_final)


def _attribute(
    rec: RequestRecord,
    *,
    times: list[float],
    weights: list[int],
    cums: list[int | None],
    usage_final: int | None,
) -> None:
    """Fill the record's token counts and per-event attribution (see the module docstring)."""
    rec.event_times = times
    if not times:
        rec.output_tokens = usage_final or 0
        rec.tokens_from_usage = usage_final is not None
        return
    rec.t_first, rec.t_last = times[0], times[-1]
    if all(c is not None for c in cums):
        # Exact: per-chunk cumulative counts.
        prev = 0
        toks: list[int] = []
        for c in cums:
            assert c is not None
            toks.append(max(0, c - prev))
            prev = max(prev, c)
        total = usage_final if usage_final is not None else prev
        if total > prev:  # tokens reported only by the final usage chunk belong to the last event
            toks[-1] += total - prev
        rec.event_tokens = toks
        rec.output_tokens = total
        rec.tokens_from_usage = True
        return
    if usage_final is not None:
        total = usage_final
        rec.tokens_from_usage = True
    else:
        # No usage at all: an estimate, flagged by tokens_from_usage=False. One token per event is the floor.
        total = len(times)
    rec.event_tokens = _apportion(total, weights)
    rec.output_tokens = total


def recount(rec: RequestRecord, total: int) -> None:
    """Replace an estimated token count with ``total`` counted by the server's tokenizer (spread evenly)."""
    rec.output_tokens = total
    rec.event_tokens = _apportion(total, [1] * len(rec.event_times))
    rec.tokens_from_usage = True  # exact, from the server's own tokenizer, even though not from ``usage``


def _apportion(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` tokens over events: one each if possible, the rest by words (largest remainder)."""
    n = len(weights)
    if total <= 0:
        return [0] * n
    if total < n:
        # Fewer tokens than events (a server that sends empty-ish chunks): give them to the heaviest events.
        order = sorted(range(n), key=lambda i: -weights[i])[:total]
        out = [0] * n
        for i in order:
            out[i] = 1
        return out
    wsum = sum(weights)
    if wsum == total and all(w > 0 for w in weights):
        return list(weights)  # the text's words are the tokens (the simulator; whitespace tokenizers)
    extra = total - n
    shares = [extra / n] * n if wsum <= 0 else [extra * w / wsum for w in weights]
    base = [int(s) for s in shares]
    left = extra - sum(base)
    for i in sorted(range(n), key=lambda i: base[i] - shares[i])[:left]:
        base[i] += 1
    return [1 + b for b in base]
