"""How big ``tune init`` makes its scenarios' requests: what the server holds a stream, less the answer and the
drafts' extra tokens, less what a prompt holds beyond its words.

Where the server was asked (``tune init --ask-server``, or it already answers on the command's port), both come
from it: its capacity (:meth:`BaseServerDialect.server_capacity`) and the prompts ``tune`` will send, counted by
its tokenizer through its chat template. Otherwise the launch flags give the capacity
(:meth:`BaseServerDialect.command_capacity`) and the prompt's tokens are guessed with a stated margin
(:data:`GUESS`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from tuner.dialects import BaseServerDialect, KvCapacity
from tuner.errors import ConfigError

__all__ = ["FULL", "GUESS", "Measured", "sizes"]

FULL = {"code_prompt": 256, "chat_prompt": 512, "output": 128, "gate_tokens": 512}
"""The scenarios' request sizes where the server's context holds them (tokens)."""
_SMALLEST_STREAM = 96
"""Fewer tokens a stream than this hold no request worth measuring."""
_SLACK = 16
"""Tokens kept free beyond a measured request: other draws of the same workload differ by a few tokens."""


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What the server said: its capacity, the tokens a random-word prompt holds beyond its words, and the largest
    coding prompt, both in its tokens with its chat template."""

    capacity: KvCapacity
    overhead: int
    code_prompt: int
    seconds: float | None = None
    """How long starting the server took (None: it was already running)."""


@dataclass(frozen=True)
class _Guess:
    words: float
    """Tokens a random word may hold (most common English words are one)."""
    code_words: float
    """Tokens a word of a coding prompt may hold (code splits into more tokens)."""
    overhead: int
    """Tokens for the request tag and a chat template (SmolLM2's llama-server: 39)."""


GUESS = _Guess(words=1.25, code_words=2.0, overhead=48)
"""The margin taken when the server cannot be asked: SmolLM2-135M's llama-server counts 1.02 tokens a random word,
1.7 a HumanEval word and 39 for the tag and its template; other tokenizers differ, so the guess is wider."""


def _draft_extra(dialect: BaseServerDialect, space: list[dict[str, Any]]) -> int:
    """The largest draft the space tries, plus the token a verification step adds."""
    return max([int(e["high"]) for e in space if e["name"] in dialect.draft_lengths and "high" in e] or [15]) + 1


def sizes(
    dialect: BaseServerDialect, command: list[str], env: dict[str, str], space: list[dict[str, Any]], *,
    conc: int, streams: int, code_words: int, measured: Measured | None,
) -> dict[str, Any]:
    """The scenarios' request sizes and the comment that says how (``streams``: the most requests any scenario,
    the open-loop one included, keeps in flight; ``code_words``: the longest coding prompt's words)."""
    capacity = measured.capacity if measured else dialect.command_capacity(command, env)
    if capacity is None:
        flags = " / ".join(dialect.context_flags) or "a context flag"
        return {**FULL, "sizing": f"# The command sets no context size ({flags}): sized for a server whose context "
                f"holds {FULL['chat_prompt'] + FULL['output']} tokens a stream and the drafts'; lower prompt_tokens "
                "and output_tokens below if yours holds less.\n"}  # fmt: skip
    drafts = _draft_extra(dialect, space)
    stream = capacity.per_stream(max(conc, streams)) - drafts
    alone = capacity.per_stream(1) - drafts
    how = f"{capacity.per_stream(max(conc, streams))} tokens a stream ({capacity.source})"
    if stream < _SMALLEST_STREAM:
        flag = (dialect.context_flags or ("its context flag",))[0]
        raise ConfigError(
            file=None, key="tune init", got=shlex.join(command),
            expected=f"a context that holds a benchmark request: {how} leaves {stream} tokens a stream after the "
            f"drafts' {drafts} (at least {_SMALLEST_STREAM}); give the server a larger {flag}"
            + (f" or fewer {dialect.slot_flags[0]}" if dialect.slot_flags else ""),
        )  # fmt: skip
    output = min(FULL["output"], stream // 4)
    if measured is not None:
        chat = stream - output - measured.overhead - _SLACK
        code = measured.code_prompt + _SLACK
        said = (f"# Sized by the server{_took(measured)}: {how}, {drafts} of them kept for the drafts' extra tokens; "
                f"prompts counted in its tokens with its chat template (a random prompt holds {measured.overhead} "
                f"tokens beyond its words, the longest coding prompt {measured.code_prompt}).\n")  # fmt: skip
    else:
        chat = int((stream - output - GUESS.overhead) / GUESS.words)
        code = int(code_words * GUESS.code_words) + GUESS.overhead
        said = (f"# Sized to the command's flags: {how}, {drafts} of them kept for the drafts' extra tokens. tune "
                f"could not count prompts in the server's tokens (tune init --ask-server does), so it allows "
                f"{GUESS.words:g} tokens a word ({GUESS.code_words:g} in code) and {GUESS.overhead} for the request "
                "tag and the chat template.\n")  # fmt: skip
    chat = min(FULL["chat_prompt"], chat)
    code_output = min(output, alone - code)
    if chat < 16 or code_output < 16:
        raise ConfigError(
            file=None, key="tune init", got=shlex.join(command),
            expected=f"a context that holds a benchmark request: {how} leaves {chat} prompt words for a chat "
            f"request and {code_output} answer tokens for the longest coding prompt ({code} tokens); give the "
            "server more context",
        )  # fmt: skip
    gate = min(FULL["gate_tokens"], alone - code)
    return {"code_prompt": min(FULL["code_prompt"], chat), "chat_prompt": chat, "output": min(output, code_output),
            "gate_tokens": gate, "sizing": said}  # fmt: skip


def _took(measured: Measured) -> str:
    return " (already running)" if measured.seconds is None else f" (started once to ask: {measured.seconds:.1f} s)"
