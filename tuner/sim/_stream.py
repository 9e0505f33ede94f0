"""The text a simulated response carries: HumanEval answers or filler words, sliced into SSE token events."""

from __future__ import annotations

import json
from typing import Any

from tuner.sim._answers import Answer, split_tokens

__all__ = ["ResponseText", "request_text"]

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


class ResponseText:
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
            content = split_tokens("<think>\n" + "".join(answer.reasoning) + "\n</think>\n\n" + "".join(answer.content))
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


def request_text(body: dict[str, Any], *, chat: bool) -> str | None:
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
