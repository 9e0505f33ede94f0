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
    placement = _placement(t, kind)
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
        **placement,
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


def _placement(t: Table, kind: str) -> dict[str, Any]:
    """Where the value goes: ``flag`` (and its ``aliases``), ``env``, or both; or a key of a JSON flag."""
    flag = t.str("flag", None)
    if flag is not None and not flag.startswith("-"):
        raise t.error("flag", "a command-line flag starting with '-'", flag)
    aliases = t.str_list("aliases", ())
    env = t.str("env", None)
    json_flag, key = _json_target(t, flag=flag, env=env)
    if flag is None and env is None and json_flag is None:
        raise t.error(
            "flag", "a flag, an env variable, or a json_flag + key (where does this parameter go?)", None
        )
    if kind == "bool" and flag is None:
        raise t.error("flag", "a switch flag for a bool parameter", None)
    return {"flag": flag, "aliases": aliases, "env": env, "json_flag": json_flag, "key": key}


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


def _json_target(t: Table, *, flag: str | None, env: str | None) -> tuple[str | None, str | None]:
    """``json_flag`` + ``key``: the value goes under ``key`` in the JSON object that flag takes."""
    json_flag = t.str("json_flag", None)
    key = t.str("key", None)
    if json_flag is None:
        if key is not None:
            raise t.error("key", "no key without json_flag (the flag whose JSON object holds it)", key)
        return None, None
    if not json_flag.startswith("-"):
        raise t.error("json_flag", "a command-line flag starting with '-', e.g. '--speculative-config'", json_flag)
    if flag is not None or env is not None:
        raise t.error("json_flag", "either json_flag + key or flag/env, not both", json_flag)
    if not key:
        raise t.error("key", f"the key inside {json_flag}'s JSON object, e.g. 'num_speculative_tokens'", key)
    return json_flag, key


def _check_json_flags(t: Table, params: dict[str, Param]) -> None:
    """Two params writing one key would overwrite each other; a plain flag must not also be a JSON flag."""
    seen: dict[tuple[str, str], str] = {}
    plain = {f for p in params.values() for f in (p.flag, *p.aliases) if f}
    for p in params.values():
        if not p.json_flag or not p.key:
            continue
        if p.json_flag in plain:
            raise t.error(f"{p.name}.json_flag", "a flag no other parameter sets directly", p.json_flag)
        other = seen.setdefault((p.json_flag, p.key), p.name)
        if other != p.name:
            raise t.error(f"{p.name}.key", f"a key not already set by [space.{other}]", p.key)


def parse_space(t: Table, constraints: list[Table]) -> SearchSpace:
    params: dict[str, Param] = {}
    for name in list(t.data):
        sub = t.table(name)
        assert sub is not None
        params[name] = parse_param(sub, name, params)
    _check_json_flags(t, params)
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
