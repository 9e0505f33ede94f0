from __future__ import annotations

from typing import Any

from tuner.config._reader import Table
from tuner.space import OPERATORS, Condition, Constraint, Param, SearchSpace, Value

_KINDS = ("int", "float", "categorical", "bool")


def _value_ok(v: object) -> bool:
    return isinstance(v, str | int | float | bool)


def parse_param(t: Table, name: str, earlier: dict[str, Param]) -> Param:
    kind = t.choice("type", _KINDS)
    numeric = _numeric(t, kind) if kind in ("int", "float") else {}
    choices = _choices(t) if kind == "categorical" else ()
    flag, aliases, env = _placement(t, kind)
    absent = t.raw("absent", None)
    if absent is not None and (kind != "categorical" or absent not in choices):
        raise t.error("absent", "one of this categorical parameter's choices", absent)
    default = t.raw("default", None)
    if default is not None and not _value_ok(default):
        raise t.error("default", "a string, number or boolean", default)
    param = Param(
        name=name,
        kind=kind,
        **numeric,
        choices=choices,
        flag=flag,
        aliases=aliases,
        env=env,
        absent=absent,
        default=default,
        when=_conditions(t, earlier),
    )
    if default is not None and not param.contains(default):
        raise t.error("default", "a value inside the parameter's range or choices", default)
    t.finish()
    return param


def _numeric(t: Table, kind: str) -> dict[str, Any]:
    """``low``, ``high``, ``step``, ``log`` of an int or float parameter."""
    num = t.int if kind == "int" else t.float
    low = num("low")
    high = num("high")
    step = num("step", None, min=0 if kind == "float" else 1)
    log = t.bool("log", False)
    if high < low:
        raise t.error("high", f"a value >= low ({low})", high)
    if log and low <= 0:
        raise t.error("low", "a value > 0 when log = true", low)
    if log and step is not None:
        raise t.error("step", "no step when log = true (Optuna does not support both)", step)
    return {"low": low, "high": high, "step": step, "log": log}


def _choices(t: Table) -> tuple[Value, ...]:
    raw = t.raw("choices")
    if not isinstance(raw, list) or not raw or not all(_value_ok(v) for v in raw):
        raise t.error("choices", "a non-empty list of strings, numbers or booleans", raw)
    if len(set(map(repr, raw))) != len(raw):
        raise t.error("choices", "distinct values", raw)
    return tuple(raw)


def _placement(t: Table, kind: str) -> tuple[str | None, tuple[str, ...], str | None]:
    """Where the value goes: ``flag`` (and its ``aliases``), ``env``, or both."""
    flag = t.str("flag", None)
    if flag is not None and not flag.startswith("-"):
        raise t.error("flag", "a command-line flag starting with '-'", flag)
    aliases = t.str_list("aliases", ())
    env = t.str("env", None)
    if flag is None and env is None:
        raise t.error("flag", "a flag, an env variable, or both (where does this parameter go?)", None)
    if kind == "bool" and flag is None:
        raise t.error("flag", "a switch flag for a bool parameter", None)
    return flag, aliases, env


def _conditions(t: Table, earlier: dict[str, Param]) -> tuple[Condition, ...]:
    """``when = { other = value | [values] }``: conditions on parameters defined earlier in the file."""
    when = t.raw("when", {})
    if not isinstance(when, dict):
        raise t.error("when", 'a table such as { algorithm = "DDTREE" }', when)
    conditions = []
    for other, values in when.items():
        if other not in earlier:
            raise t.error(f"when.{other}", "the name of a parameter defined earlier in [space]", other)
        vals = tuple(values) if isinstance(values, list) else (values,)
        for v in vals:
            if not earlier[other].contains(v):
                raise t.error(f"when.{other}", f"values that {other} can take", v)
        conditions.append(Condition(param=other, values=vals))
    return tuple(conditions)


def parse_space(t: Table, constraints: list[Table]) -> SearchSpace:
    params: dict[str, Param] = {}
    for name in list(t.data):
        sub = t.table(name)
        assert sub is not None
        params[name] = parse_param(sub, name, params)
    if not params:
        raise t.error("(parameters)", "at least one [space.NAME] parameter table", None)
    parsed = []
    for ct in constraints:
        left = ct.str("left")
        op = ct.choice("op", OPERATORS)
        right = ct.raw("right")
        if left not in params:
            raise ct.error("left", "a parameter name from [space]", left)
        if isinstance(right, str):
            if right not in params:
                raise ct.error("right", "a parameter name from [space] or a number", right)
        elif isinstance(right, bool) or not isinstance(right, int | float):
            raise ct.error("right", "a parameter name from [space] or a number", right)
        ct.finish()
        parsed.append(Constraint(left=left, op=op, right=right))
    t.finish()
    return SearchSpace(params=tuple(params.values()), constraints=tuple(parsed))
