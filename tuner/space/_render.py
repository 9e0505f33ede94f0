from __future__ import annotations

from collections.abc import Mapping

from tuner.errors import ConfigError
from tuner.space._model import Param, SearchSpace, Value
from tuner.spec import LaunchSpec


def _spellings(p: Param) -> tuple[str, ...]:
    return (p.flag, *p.aliases) if p.flag else ()


def _strip_flag(argv: list[str], p: Param) -> tuple[list[str], str | None, bool]:
    """Remove every occurrence of ``p``'s flag from argv; return (argv, last value seen, seen at all)."""
    out: list[str] = []
    value: str | None = None
    seen = False
    names = _spellings(p)
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if name in names:
            seen = True
            if p.kind == "bool":
                value = "true"
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
            argv, _, _ = _strip_flag(argv, p)
        if p.env:
            env.pop(p.env, None)
        if p.name not in params or not p.active(params):
            continue
        value = p.effective(params[p.name])
        if value is None:
            continue
        if p.flag:
            if p.kind == "bool":
                if value:
                    argv.append(p.flag)
            else:
                argv.extend([p.flag, format_value(value)])
        if p.env:
            env[p.env] = format_value(value)
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


def baseline_params(space: SearchSpace, base: LaunchSpec) -> dict[str, Value]:
    """The parameter values the unmodified base command already runs (trial 0 of every study)."""
    params: dict[str, Value] = {}
    for p in space.params:
        if not p.active(params):
            continue
        found: Value | None = None
        if p.flag:
            _, text, seen = _strip_flag(list(base.argv), p)
            if seen:
                found = _parse(p, text or "", where="the base command")
            elif p.kind == "bool":
                found = False
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
