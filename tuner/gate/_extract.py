"""Turn a chat answer into a runnable HumanEval program: pure functions, no I/O.

A thinking model's answer is reasoning plus an answer. The reasoning is dropped first (a separate
``reasoning_content`` field never reaches these functions; inline ``<think>...</think>`` is removed here, an
unclosed ``<think>`` swallows the rest of the text, a bare ``</think>`` means the server's chat template
opened the block). Models often show a wrong draft before the corrected one, so the *last* fenced Python
block wins.
The result is either a function body (HumanEval's completion format: appended to the prompt) or a full
definition of the entry point (kept as-is after the prompt's own imports and helpers).
"""

from __future__ import annotations

import re

__all__ = [
    "assemble_program",
    "extract_code",
    "last_code_block",
    "strip_reasoning",
]

# Tag names used by common reasoning models/chat templates (DeepSeek/Qwen/Kimi use <think>).
_THINK_TAGS = ("think", "thinking", "reasoning")
_CLOSED_THINK_RE = re.compile(r"<(?P<tag>" + "|".join(_THINK_TAGS) + r")>.*?</(?P=tag)>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK_RE = re.compile(r"<(?:" + "|".join(_THINK_TAGS) + r")>", re.IGNORECASE)
_CLOSE_THINK_RE = re.compile(r"</(?:" + "|".join(_THINK_TAGS) + r")>", re.IGNORECASE)
_LEADING_BLANK_LINES_RE = re.compile(r"\A(?:[ \t]*\n)+")

# "Final answer:", "**Final Answer**", "### Final answer", "Final solution:" at the start of a line.
_FINAL_MARKER_RE = re.compile(
    r"^[ \t#>*_]*final[ \t]+(?:answer|solution|code)\b[ \t*_:.]*", re.IGNORECASE | re.MULTILINE
)

# An opening fence with an optional info string, its body, and the closing fence: on its own line, or glued to
# the end of the last code line (``return x```'', seen in real answers), or the end of the text (a truncated
# answer still yields its code, which then fails or passes on its merits). The gate judges code, not markdown.
_FENCE_RE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)"
    r"(?:^[ \t]*(?P=fence)[ \t]*$|(?P=fence)[ \t]*$|\Z)",
    re.DOTALL | re.MULTILINE,
)
_PYTHON_INFO = {"", "python", "py", "python3", "py3", "pycon"}


def strip_reasoning(text: str) -> str:
    """Remove inline reasoning: ``<think>...</think>`` blocks, an unclosed ``<think>...``, and text before a
    stray ``</think>`` (the opening tag was part of the prompt template)."""
    text = _CLOSED_THINK_RE.sub("", text)
    # A closing tag without an opening one: everything before it was reasoning.
    closes = list(_CLOSE_THINK_RE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    # An opening tag that never closed: the model ran out of tokens while thinking; nothing after it counts.
    opened = _OPEN_THINK_RE.search(text)
    if opened:
        text = text[: opened.start()]
    # Blank lines go, indentation stays: an unfenced answer may be a function body.
    return _LEADING_BLANK_LINES_RE.sub("", text).rstrip()


def _after_final_marker(text: str) -> str:
    markers = list(_FINAL_MARKER_RE.finditer(text))
    if not markers:
        return text
    tail = text[markers[-1].end() :]
    if not tail.strip():
        return text
    # "The final answer is the code above" must not erase that code: a marker only wins if the code is
    # after it, or if there are no code blocks at all (then the text after it is the raw answer).
    if last_code_block(tail) is not None or last_code_block(text) is None:
        return _LEADING_BLANK_LINES_RE.sub("", tail)
    return text


def last_code_block(text: str) -> str | None:
    """The body of the last fenced Python block (```python, ```py, or a bare fence); None if there is none."""
    found: str | None = None
    for match in _FENCE_RE.finditer(text):
        info = match.group("info").strip().split()
        language = info[0].lower() if info else ""
        if language in _PYTHON_INFO:
            found = match.group("body")
    return found


def extract_code(content: str) -> str:
    """The code of an answer's content: reasoning dropped, text after a final-answer marker preferred, the
    last Python block taken; the whole remaining text when the model used no fences."""
    text = _after_final_marker(strip_reasoning(content))
    block = last_code_block(text)
    code = block if block is not None else text
    return code.strip("\n")


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", code, re.MULTILINE) is not None


def _indent_body(code: str) -> str:
    # A body written flush-left (``return x``) would be a syntax error after the prompt's signature.
    lines = code.splitlines()
    first = next((line for line in lines if line.strip()), "")
    if not first or first[0] in " \t":
        return code
    return "\n".join(("    " + line) if line.strip() else line for line in lines)


def assemble_program(*, prompt: str, code: str, entry_point: str) -> str:
    """The program to run before the tests.

    A full definition of ``entry_point`` is used as-is, after the prompt's text that precedes the entry
    point's ``def`` (its imports and helper functions such as HumanEval/10's ``is_palindrome``): redefining a
    helper in the answer is harmless, losing one is not. Otherwise ``code`` is a body appended to the prompt,
    as HumanEval's completion format expects.
    """
    if _defines(code, entry_point):
        match = re.search(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(entry_point)}[ \t]*\(", prompt, re.MULTILINE)
        preamble = prompt[: match.start()] if match else ""
        return preamble.rstrip() + ("\n\n\n" if preamble.strip() else "") + code.rstrip() + "\n"
    return prompt + _indent_body(code).rstrip() + "\n"
