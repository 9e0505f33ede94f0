from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tuner.errors import ConfigError
from tuner.space._model import Param, SearchSpace, Value
from tuner.spec import LaunchSpec


def _spellings(p: Param) -> tuple[str, ...]:
    return (p.flag, *p.aliases) if p.flag else ()


def _negated(flag: str) -> str:
    return "--no-" + flag.removeprefix("--")


def bool_argv(style: str, flag: str, value: bool) -> list[str]:
    """A boolean flag as argv elements in a server's style (see ``BOOL_STYLES``)."""
    if style == "value":
        return [flag, "true" if value else "false"]
    if style == "negatable":
        return [flag if value else _negated(flag)]
    return [flag] if value else []


def _strip_flag(argv: list[str], p: Param, style: str = "switch") -> tuple[list[str], str | None, bool]:
    """Remove every occurrence of ``p``'s flag from argv; return (argv, last value seen, seen at all)."""
    out: list[str] = []
    value: str | None = None
    seen = False
    names = _spellings(p)
    negated = tuple(_negated(n) for n in names) if p.kind == "bool" and style == "negatable" else ()
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if name in negated:
            seen, value = True, "false"
            i += 1
            continue
        if name in names:
            seen = True
            if p.kind == "bool" and style != "value" and not eq:
                value = "true"  # a switch: the next element is another argument
            elif eq:
                value = inline
            elif i + 1 < len(argv):
                value = argv[i + 1]
                i += 1
            i += 1
            continue
        out.append(arg)
        i += 1
    return out, value, seen


def format_value(value: Value) -> str:
    """A value as the server (and the user) should read it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        # Optuna's stepped floats carry binary noise (0.7999999999999999); print what the user meant.
        return f"{value:.10g}"
    return str(value)


def _json_flag(argv: list[str], flag: str) -> tuple[list[str], dict[str, Any] | None]:
    """Remove a JSON-valued flag from argv; return (argv, its object in the base command or None)."""
    out, text, seen = _strip_flag(argv, Param(name=flag, kind="categorical", flag=flag))
    if not seen:
        return out, None
    try:
        obj = json.loads(text or "")
    except ValueError as exc:
        raise ConfigError(
            file=None, key="target.command", expected=f"{flag} to be followed by a JSON object ({exc})", got=text
        ) from None
    if not isinstance(obj, dict):
        raise ConfigError(file=None, key="target.command", expected=f"{flag} to hold a JSON object", got=text)
    return out, obj


def _render_json(space: SearchSpace, argv: list[str], params: Mapping[str, Value]) -> list[str]:
    """Each JSON flag: the base command's object with the trial's keys set (inactive/absent keys removed)."""
    for flag in space.json_flags():
        argv, obj = _json_flag(argv, flag)
        had = obj is not None
        obj = dict(obj or {})
        for p in space.params:
            if p.json_flag != flag:
                continue
            assert p.key is not None
            obj.pop(p.key, None)
            value = p.effective(params[p.name]) if p.name in params and p.active(params) else None
            if value is not None:
                obj[p.key] = value
        if obj or had:
            argv.extend([flag, json.dumps(obj, separators=(",", ":"))])
    return argv


def render(space: SearchSpace, base: LaunchSpec, params: Mapping[str, Value]) -> LaunchSpec:
    """The base launch spec with ``params`` applied.

    Every spelling of a tuned flag is first removed from the base argv, then the trial's value is appended
    (or nothing, for a "flag absent" choice or an inactive parameter). Values are argv elements, never shell
    text: a categorical value with shell metacharacters stays one literal argument.
    """
    argv = list(base.argv)
    env = dict(base.env)
    for p in space.params:
        if p.flag:
            argv, _, _ = _strip_flag(argv, p, space.bool_style)
        if p.env:
            env.pop(p.env, None)
        if p.name not in params or not p.active(params):
            continue
        value = p.effective(params[p.name])
        if value is None:
            continue
        if p.flag:
            if p.kind == "bool":
                argv.extend(bool_argv(space.bool_style, p.flag, bool(value)))
            else:
                argv.extend([p.flag, format_value(value)])
        if p.env:
            env[p.env] = format_value(value)
    argv = _render_json(space, argv, params)
    return LaunchSpec(argv=tuple(argv), env=env)


def _parse(p: Param, text: str, *, where: str) -> Value:
    if p.kind == "bool":
        return text.lower() in ("1", "true", "yes", "on")
    if p.kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ConfigError(file=None, key=f"space.{p.name}", expected=f"an integer in {where}", got=text) from None
    if p.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ConfigError(file=None, key=f"space.{p.name}", expected=f"a number in {where}", got=text) from None
    for choice in p.choices:
        if format_value(choice) == text:
            return choice
    raise ConfigError(file=None, key=f"space.{p.name}", expected=f"{where} to hold one of {list(p.choices)}", got=text)


def _json_baseline(p: Param, obj: dict[str, Any]) -> Value | None:
    """``p``'s value in its JSON flag's object from the base command (None when the key is not there)."""
    if p.key not in obj:
        return None
    raw = obj[p.key]
    if not isinstance(raw, str | int | float | bool):
        raise ConfigError(
            file=None,
            key=f"space.{p.name}",
            expected=f"{p.json_flag}'s {p.key!r} in the base command to be a string, number or boolean",
            got=raw,
        )
    if p.kind == "float" and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    return raw


def baseline_params(space: SearchSpace, base: LaunchSpec) -> dict[str, Value]:
    """The parameter values the unmodified base command already runs (trial 0 of every study)."""
    params: dict[str, Value] = {}
    objects = {flag: _json_flag(list(base.argv), flag)[1] or {} for flag in space.json_flags()}
    for p in space.params:
        if not p.active(params):
            continue
        found: Value | None = None
        if p.json_flag:
            found = _json_baseline(p, objects[p.json_flag])
        if p.flag:
            _, text, seen = _strip_flag(list(base.argv), p, space.bool_style)
            if seen:
                found = _parse(p, text or "", where="the base command")
            elif p.kind == "bool":
                # Absent: the server's default (vLLM turns some features on unless --no-...), else off.
                found = p.default if isinstance(p.default, bool) else False
        if found is None and p.env and p.env in base.env:
            found = _parse(p, base.env[p.env], where=f"target.env.{p.env}")
        if found is None:
            found = p.absent if p.absent is not None else p.default
        if found is None:
            raise ConfigError(
                file=None,
                key=f"space.{p.name}",
                expected="the flag in the base command, an `absent` choice or a `default` (the server's value "
                "when the flag is missing), so the baseline trial can be recorded",
            )
        if not p.contains(found):
            raise ConfigError(
                file=None,
                key=f"space.{p.name}",
                expected="the search space to contain the base command's value (widen the range or choices)",
                got=found,
            )
        params[p.name] = found
    return params
