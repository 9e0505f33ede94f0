from __future__ import annotations

from collections.abc import Sequence

from tuner.dialects._base import BaseServerDialect


class GenericDialect(BaseServerDialect):
    """Any OpenAI-compatible server: ``/v1/chat/completions`` and nothing else is assumed.

    Readiness is a real generation, acceptance is not measured, tokens come from ``usage`` when the stream
    has it. Never detected from a command: it is what an unrecognised command gets.
    """

    name = "generic"
    stream_usage = False
    """Not known: usage is used when a stream has it, otherwise tokens are estimated."""

    @classmethod
    def matches(cls, argv: Sequence[str]) -> str | None:
        return None
