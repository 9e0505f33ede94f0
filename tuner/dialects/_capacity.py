"""How many tokens a server holds for its requests: one request's context, and the KV pool running requests share.

A request holds its prompt (in the server's tokens, chat template included), its answer and the drafts' extra
tokens (a verification step puts ``n_max + 1`` tokens in the KV before it keeps the accepted ones). A server
serves at most ``slots`` requests at once (more wait), and they share the ``pool``: ``min(concurrency, slots)``
largest requests must fit in it, or the server fails mid-stream (llama-server: "failed to find free space in
the KV cache"). Each dialect says where its server states these figures (:meth:`BaseServerDialect.capacity_paths`,
``server_capacity``) and what its launch flags imply (``command_capacity``); this module is the arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.spec import flag_value

__all__ = ["KvCapacity", "RequestSize", "answer_int", "int_value"]


@dataclass(frozen=True, kw_only=True)
class RequestSize:
    """The tokens one request of a scenario holds at its largest, and where each part comes from."""

    prompt: int
    output: int
    drafts: int
    """The drafts' extra tokens at a verification step (the largest draft length the study tries, plus one)."""
    measured: str = ""
    """How the prompt was counted (``the server's /tokenize``, or the estimate's words)."""

    @property
    def total(self) -> int:
        return self.prompt + self.output + self.drafts

    def describe(self) -> str:
        how = f" [{self.measured}]" if self.measured else ""
        return f"prompt {self.prompt}{how} + output {self.output} + drafts {self.drafts}"


@dataclass(frozen=True, kw_only=True)
class KvCapacity:
    """A server's token capacity, as its launch flags or its own endpoints state it."""

    request: int
    """The tokens one request may hold (its slot's context)."""
    pool: int | None = None
    """The tokens every running request shares (None: the server states none, or it queues rather than fails)."""
    slots: int | None = None
    """Requests served at once; more wait for a slot (None: no limit stated)."""
    source: str = ""
    """Where the figures come from, in words: ``-c 2048, 4 slots (auto), one unified KV pool``."""

    def streams(self, concurrency: int) -> int:
        """The requests of ``concurrency`` streams that hold KV at the same time."""
        return concurrency if self.slots is None else min(concurrency, self.slots)

    def per_stream(self, concurrency: int) -> int:
        """The tokens each of ``concurrency`` streams may hold so that all of them fit."""
        share = self.request
        if self.pool is not None:
            share = min(share, self.pool // max(1, self.streams(concurrency)))
        return share

    def problem(self, size: RequestSize, concurrency: int) -> str | None:
        """Why ``concurrency`` streams of requests of ``size`` do not fit, in one clause with the numbers; None
        when they do."""
        if size.total > self.request:
            return (f"a request holds {size.total} tokens ({size.describe()}) > the {self.request} a request may "
                    f"hold ({self.source})")  # fmt: skip
        streams = self.streams(concurrency)
        if self.pool is not None and streams * size.total > self.pool:
            return (f"{streams} streams x {size.total} tokens ({size.describe()}) = {streams * size.total} > the "
                    f"{self.pool}-token KV pool they share ({self.source})")  # fmt: skip
        return None


def int_value(argv: Sequence[str], flags: Sequence[str], env: Mapping[str, str], var: str | None = None) -> int | None:
    """``flag_value`` as an integer (or the environment twin's, which the command line overrides)."""
    text = flag_value(argv, flags)
    if text is None and var is not None:
        text = env.get(var)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def answer_int(answer: Any, *keys: str) -> int | None:
    """``answer[k1][k2]...`` when it is a positive integer, else None (a server's JSON, read defensively)."""
    for key in keys:
        answer = answer.get(key) if isinstance(answer, dict) else None
    return answer if isinstance(answer, int) and not isinstance(answer, bool) and answer > 0 else None
