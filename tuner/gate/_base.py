from __future__ import annotations

import abc
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class ProblemOutcome:
    task_id: str
    passed: bool
    reason: str = ""
    """Why it failed: wrong answer, timeout, no code found, request error..."""
    code: str = ""
    """The program that was executed (prompt + extracted completion)."""
    response: str = ""
    """The model's raw answer, reasoning included, kept for inspection."""


@dataclass(frozen=True, kw_only=True)
class GateResult:
    passed: int
    total: int
    outcomes: tuple[ProblemOutcome, ...] = field(default_factory=tuple)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def failures(self) -> tuple[ProblemOutcome, ...]:
        return tuple(o for o in self.outcomes if not o.passed)

    def summary(self) -> str:
        """One line for logs and user attrs.

        E.g. ``gate 4/5 passed in 3.1 s; failed HumanEval/10: AssertionError``.
        """
        line = f"gate {self.passed}/{self.total} passed in {self.seconds:.1f} s"
        failed = self.failures
        if failed:
            shown = "; ".join(f"{o.task_id}: {_first_line(o.reason)}" for o in failed[:3])
            more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
            line += f"; failed {shown}{more}"
        return line


def _first_line(text: str, limit: int = 80) -> str:
    first = (text.strip().splitlines() or ["failed"])[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


class BaseGate(abc.ABC):
    """How answers are judged: the correctness seam."""

    @abc.abstractmethod
    def run(self) -> GateResult:
        """Ask the server every problem and judge its answers."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients."""
