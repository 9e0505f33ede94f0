from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Value = str | int | float | bool

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
}
OPERATORS = tuple(_OPS)

BOOL_STYLES = ("switch", "value", "negatable")
"""How a server writes a boolean flag: ``--flag`` alone, ``--flag true|false``, or ``--flag`` / ``--no-flag``."""


@dataclass(frozen=True, kw_only=True)
class Condition:
    """The parameter exists only when ``param`` takes one of ``values`` (e.g. budget only for DDTREE)."""

    param: str
    values: tuple[Value, ...]

    def holds(self, params: Mapping[str, Value]) -> bool:
        return self.param in params and params[self.param] in self.values

    def __str__(self) -> str:
        return f"{self.param} in {list(self.values)}"


@dataclass(frozen=True, kw_only=True)
class Constraint:
    """``left OP right`` between two parameters (or a parameter and a number), checked declaratively.

    A side that is inactive (its condition does not hold) or set to its "flag absent" choice has no value,
    and the constraint is then satisfied: "window >= block size" says nothing when there is no window.
    """

    left: str
    op: str
    right: str | float

    def check(self, values: Mapping[str, Value | None]) -> bool:
        lhs = values.get(self.left)
        rhs = values.get(self.right) if isinstance(self.right, str) else self.right
        if lhs is None or rhs is None:
            return True
        return bool(_OPS[self.op](lhs, rhs))

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True, kw_only=True)
class Param:
    """One tunable knob: its distribution and where it lands (a flag, an environment variable, or both)."""

    name: str
    kind: str
    """``int``, ``float``, ``categorical`` or ``bool`` (a switch: the flag alone, no value)."""
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Value, ...] = ()
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    """Other spellings of the flag in the base command (e.g. --speculative-num-draft-tokens)."""
    env: str | None = None
    json_flag: str | None = None
    """A flag whose value is a JSON object (vLLM's ``--speculative-config``); the value goes under ``key``."""
    key: str | None = None
    absent: Value | None = None
    """The categorical choice that means "leave the flag/variable out" (e.g. "none" for no window)."""
    default: Value | None = None
    """The server's own value when the flag is absent from the base command (for the baseline trial)."""
    when: tuple[Condition, ...] = ()

    def active(self, params: Mapping[str, Value]) -> bool:
        return all(c.holds(params) for c in self.when)

    def effective(self, value: Value) -> Value | None:
        """The value as the server sees it: None when it means "absent"."""
        if self.absent is not None and value == self.absent:
            return None
        return value

    def contains(self, value: Value) -> bool:
        if self.kind == "categorical":
            return value in self.choices
        if self.kind == "bool":
            return isinstance(value, bool)
        assert self.low is not None and self.high is not None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not self.low <= value <= self.high:
            return False
        if self.kind == "int" and not float(value).is_integer():
            return False
        if self.step is not None:
            k = (value - self.low) / self.step
            return abs(k - round(k)) < 1e-9
        return True


@dataclass(frozen=True, kw_only=True)
class SearchSpace:
    params: tuple[Param, ...]
    constraints: tuple[Constraint, ...] = ()
    bool_style: str = "switch"
    """How the target server writes boolean flags (one of ``BOOL_STYLES``; set from the server dialect)."""

    def json_flags(self) -> tuple[str, ...]:
        """The JSON-valued flags the space writes into, in first-use order (several params may share one)."""
        return tuple(dict.fromkeys(p.json_flag for p in self.params if p.json_flag))

    def by_name(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def effective_values(self, params: Mapping[str, Value]) -> dict[str, Value | None]:
        """Active parameters with "absent" choices mapped to None (what constraints compare)."""
        out: dict[str, Value | None] = {}
        for p in self.params:
            if p.name in params and p.active(params):
                out[p.name] = p.effective(params[p.name])
        return out

    def branch_params(self) -> list[Param]:
        """Unconditional categorical parameters that switch other parameters on or off (e.g. ``algorithm``)."""
        gating = {c.param for p in self.params for c in p.when}
        return [p for p in self.params if p.name in gating and p.kind == "categorical" and not p.when]

    def violations(self, params: Mapping[str, Value]) -> list[Constraint]:
        values = self.effective_values(params)
        return [c for c in self.constraints if not c.check(values)]
