"""An SGLang version's command line, as read from its released code by ``scripts/sglang_flags.py``.

The tables are package data (``tuner/dialects/sglang_flags/<name>.json``), each naming the wheel it came from.
:meth:`FlagTable.parse_errors` is the one rule for "does this argv start on that version": ``tune check``,
``tune init``, the study-file contract test and the simulator all ask it. It parses with a real
:class:`argparse.ArgumentParser` built from the table, so prefix matching, ambiguous prefixes, value counts,
types and choices behave as SGLang's own parser does (which is argparse, ``allow_abbrev`` on), and then checks
``--speculative-algorithm`` against the version's algorithms the way ``SpeculativeAlgorithm.from_string`` does
after parsing.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, NoReturn

from tuner.spec import program_part

__all__ = ["FlagOption", "FlagTable", "known_tables", "server_argv", "sglang_table"]

_PACKAGE = "tuner.dialects"
_FOLDER = "sglang_flags"


@dataclass(frozen=True, kw_only=True)
class FlagOption:
    """One registered option: every spelling, how many values it takes, what it accepts."""

    flags: tuple[str, ...]
    dest: str
    nargs: int | str | None
    """argparse's nargs: None = one value, 0 = a switch, ``?`` / ``*`` / ``+``."""
    type: str | None
    choices: tuple[Any, ...] | None
    default: Any
    required: bool
    hidden: bool
    """Registered with ``help=argparse.SUPPRESS``: accepted, but ``--help`` does not list it."""
    replaced_by: str | None
    """A deprecated spelling: what SGLang's warning tells the user to use instead."""
    help: str | None
    where: str

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0


class _ParseError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises its message instead of printing it and exiting."""

    def error(self, message: str) -> NoReturn:
        raise _ParseError(message)


def human_readable_int(value: str) -> int:
    """SGLang's ``human_readable_int``: 25.6k, 1M, 2Ki, or a plain integer."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value.strip())
    if not match:
        return int(value)
    number, suffix = match.groups()
    scale = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    if suffix.endswith("i") and "." in number:
        raise ValueError(value)
    return int(float(number) * scale[suffix])


# The converters SGLang passes as `type=`, under the names argparse prints in "invalid <name> value" errors.
# A converter the table names but tune does not know accepts any text (it is checked by the real server only).
_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "json.loads": json.loads,
    "json_list_type": json.loads,
    "human_readable_int": human_readable_int,
}


class FlagTable:
    """The options, ``--speculative-algorithm`` names and messages of one SGLang version."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self.name: str = data["name"]
        self.version: str = data["version"]
        self.variant: str = data.get("variant", "mainline")
        self.source: str = data["source"]
        self.options = tuple(_option(o) for o in data["options"])
        self._by_flag = {f: o for o in self.options for f in o.flags}
        algos = data["speculative_algorithms"]
        self.algorithms: frozenset[str] = frozenset(algos["names"])
        self.algorithm_aliases: dict[str, str] = dict(algos.get("aliases") or {})
        self.messages: dict[str, str] = {k: v["text"] for k, v in data["messages"].items() if v}
        self.metrics: dict[str, str] = dict(data.get("metrics") or {})
        self.endpoints: tuple[str, ...] = tuple(data.get("endpoints") or ())
        self.environment: dict[str, Any] = dict(data.get("environment") or {})
        self._argparser: argparse.ArgumentParser | None = None

    def __repr__(self) -> str:
        return f"FlagTable({self.name!r})"

    def option(self, flag: str) -> FlagOption | None:
        """The option registered under exactly this spelling."""
        return self._by_flag.get(flag)

    def resolve(self, flag: str) -> tuple[FlagOption | None, list[str]]:
        """(the option ``flag`` selects, the candidates when it is an ambiguous prefix) as argparse decides it."""
        if flag in self._by_flag:
            return self._by_flag[flag], []
        if not self.data["parser"].get("allow_abbrev", True):
            return None, []
        hits = sorted(f for f in self._by_flag if f.startswith(flag))
        owners = {id(self._by_flag[f]) for f in hits}
        if len(owners) == 1:
            return self._by_flag[hits[0]], []
        return None, hits

    def listed(self) -> frozenset[str]:
        """The spellings ``--help`` prints (everything but the hidden ones)."""
        return frozenset(f for o in self.options if not o.hidden for f in o.flags)

    def canonical_algorithm(self, name: str) -> str | None:
        """The algorithm ``--speculative-algorithm NAME`` selects (case-insensitive, aliases resolved), or None."""
        upper = name.upper()
        if upper in self.algorithms:
            return upper
        return self.algorithm_aliases.get(upper)

    def parse_errors(self, argv: Sequence[str], *, ignore_prefix: str | None = None) -> list[str]:
        """Why SGLang would refuse to start with ``argv`` (the program part is skipped); empty when it parses.

        The first message is argparse's own ("unrecognized arguments: ...", "ambiguous option: ...",
        "argument --x: invalid int value: ..."); an unknown algorithm is SGLang's ``ValueError`` text.
        ``ignore_prefix`` (the simulator's ``--sim-``): options of a wrapper, and their values, are not SGLang's.
        """
        args = server_argv(argv)
        try:
            namespace, extras = self._parser().parse_known_args(list(args))
        except _ParseError as exc:
            return [str(exc)]
        unknown = _unknown(extras, ignore_prefix)
        if unknown:
            return [f"unrecognized arguments: {' '.join(unknown)}"]
        algorithm = getattr(namespace, "speculative_algorithm", None)
        if isinstance(algorithm, str) and self.canonical_algorithm(algorithm) is None:
            text = self.messages.get("unknown_algorithm", "Unknown speculative algorithm name: {name}")
            return [f"ValueError: {text.replace('{name}', algorithm)}"]
        return []

    def _parser(self) -> argparse.ArgumentParser:
        if self._argparser is not None:
            return self._argparser
        settings = self.data["parser"]
        parser = _Parser(prog=settings.get("prog") or "sglang", allow_abbrev=settings.get("allow_abbrev", True),
                         add_help=False)
        # SGLang's parser has argparse's -h/--help; it takes part in prefix matching (here it never exits).
        parser.add_argument("-h", "--help", dest="_help", action="store_true")
        for o in self.options:
            if o.nargs == 0:
                parser.add_argument(*o.flags, dest=o.dest, action="store_true")
                continue
            kwargs: dict[str, Any] = {"dest": o.dest, "nargs": o.nargs, "required": o.required}
            kwargs["type"] = _CONVERTERS.get(o.type or "str", str)
            if o.choices is not None and kwargs["type"] in (str, int, float):
                kwargs["choices"] = list(o.choices)
            parser.add_argument(*o.flags, **kwargs)
        self._argparser = parser
        return parser

    def value_error(self, flag: str, text: str) -> str | None:
        """argparse's complaint about ``flag text`` (type or choices), None when the value is accepted."""
        option, _ = self.resolve(flag)
        if option is None or not option.takes_value:
            return None
        convert = _CONVERTERS.get(option.type or "str", str)
        name = "/".join(option.flags)
        try:
            value = convert(text)
        except (TypeError, ValueError):
            return f"argument {name}: invalid {getattr(convert, '__name__', convert)} value: {text!r}"
        if option.choices is not None and convert in (str, int, float) and value not in option.choices:
            return f"argument {name}: invalid choice: {value!r} (choose from {', '.join(map(repr, option.choices))})"
        return None

    def verdict(self, flag: str) -> str:
        """What this version makes of one spelling, in words (for reports and ``tune check``)."""
        option, ambiguous = self.resolve(flag)
        if option is None:
            if ambiguous:
                return f"ambiguous: could match {', '.join(ambiguous)}"
            return "unknown"
        if option.replaced_by:
            how = "hidden " if option.hidden else ""
            return f"accepted as a deprecated {how}alias of {option.replaced_by}"
        if option.hidden:
            return "accepted but hidden from --help"
        if flag not in option.flags:
            return f"accepted as an abbreviation of {option.flags[0]}"
        return "accepted"


def _unknown(extras: Sequence[str], ignore_prefix: str | None) -> list[str]:
    """argparse's leftovers, without the options that start with ``ignore_prefix`` and the values after them."""
    out: list[str] = []
    skipping = False
    for token in extras:
        if token.startswith("-"):
            skipping = bool(ignore_prefix) and token.startswith(ignore_prefix or "")
        if not skipping:
            out.append(token)
    return out


def server_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """The server's own arguments: ``argv`` without its program part (``python -m sglang.launch_server``)."""
    return tuple(argv[len(program_part(tuple(argv))):])


def _option(o: Mapping[str, Any]) -> FlagOption:
    choices = o.get("choices")
    return FlagOption(
        flags=tuple(o["flags"]),
        dest=o["dest"],
        nargs=o.get("nargs"),
        type=o.get("type"),
        choices=tuple(choices) if isinstance(choices, list) else None,
        default=o.get("default"),
        required=bool(o.get("required")),
        hidden=bool(o.get("hidden")),
        replaced_by=o.get("replaced_by"),
        help=o.get("help"),
        where=o.get("where", ""),
    )


def known_tables() -> tuple[str, ...]:
    """The names of the flag tables shipped with tune."""
    files = resources.files(_PACKAGE).joinpath(_FOLDER).iterdir()
    return tuple(sorted(f.name.removesuffix(".json") for f in files if f.name.endswith(".json")))


@functools.cache
def sglang_table(name: str) -> FlagTable:
    """The shipped flag table ``name`` (``0.5.23``, ``ddtree-pr29907``, ...); KeyError when there is none."""
    if name not in known_tables():
        raise KeyError(f"no SGLang flag table {name!r} (known: {', '.join(known_tables())})")
    text = resources.files(_PACKAGE).joinpath(_FOLDER, f"{name}.json").read_text()
    return FlagTable(json.loads(text))
