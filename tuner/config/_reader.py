from __future__ import annotations

import builtins
import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from tuner.errors import ConfigError

T = TypeVar("T")

_MISSING: Any = object()


class Table:
    """A TOML table being validated: every accessor knows the file and the dotted key it reads.

    Unknown keys are errors (``finish``): a typo such as ``concurency`` must not silently fall back to a
    default and waste a night of trials.
    """

    def __init__(self, data: Mapping[str, Any], *, file: Path | None, key: builtins.str) -> None:
        if not isinstance(data, Mapping):
            raise ConfigError(file=file, key=key or "(top level)", expected="a table", got=data)
        self.data = data
        self.file = file
        self.key = key
        self._seen: set[builtins.str] = set()

    def path(self, name: builtins.str) -> builtins.str:
        return f"{self.key}.{name}" if self.key else name

    def error(self, name: builtins.str, expected: builtins.str, got: object = None) -> ConfigError:
        return ConfigError(file=self.file, key=self.path(name), expected=expected, got=got)

    def error_here(self, expected: builtins.str, got: object = None) -> ConfigError:
        """An error about the table as a whole (what it lacks), named by its own key."""
        return ConfigError(file=self.file, key=self.key or "(top level)", expected=expected, got=got)

    def has(self, name: builtins.str) -> builtins.bool:
        return name in self.data

    def raw(self, name: builtins.str, default: Any = _MISSING) -> Any:
        self._seen.add(name)
        if name not in self.data:
            if default is _MISSING:
                typo = difflib.get_close_matches(name, [k for k in self.data if k not in self._seen], n=1)
                if typo:
                    raise self.error(typo[0], f"a known key (did you mean {name!r}?)", None)
                raise self.error(name, "a value (this key is required)")
            return default
        return self.data[name]

    def str(self, name: builtins.str, default: Any = _MISSING) -> Any:
        value = self.raw(name, default)
        if value is not default and not isinstance(value, str):
            raise self.error(name, "a string", value)
        return value

    def bool(self, name: builtins.str, default: Any = _MISSING) -> Any:
        value = self.raw(name, default)
        if value is not default and not isinstance(value, bool):
            raise self.error(name, "true or false", value)
        return value

    def int(
        self,
        name: builtins.str,
        default: Any = _MISSING,
        *,
        min: builtins.int | None = None,
        max: builtins.int | None = None,
    ) -> Any:
        value = self.raw(name, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(name, "an integer", value)
        self._check_range(name, value, min, max)
        return value

    def float(
        self,
        name: builtins.str,
        default: Any = _MISSING,
        *,
        min: builtins.float | None = None,
        max: builtins.float | None = None,
    ) -> Any:
        value = self.raw(name, default)
        if value is default:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(name, "a number", value)
        self._check_range(name, value, min, max)
        return float(value)

    def choice(self, name: builtins.str, choices: Sequence[builtins.str], default: Any = _MISSING) -> Any:
        value = self.raw(name, default)
        if value is not default and value not in choices:
            raise self.error(name, "one of " + ", ".join(repr(c) for c in choices), value)
        return value

    def str_list(self, name: builtins.str, default: Any = _MISSING) -> Any:
        value = self.raw(name, default)
        if value is default:
            return value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(name, "a list of strings", value)
        return tuple(value)

    def str_map(self, name: builtins.str, default: Any = _MISSING) -> Any:
        value = self.raw(name, default)
        if value is default:
            return value
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise self.error(name, "a table of string values", value)
        return dict(value)

    def table(self, name: builtins.str, *, required: builtins.bool = False) -> Table | None:
        value = self.raw(name, _MISSING if required else None)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self.error(name, "a table", value)
        return Table(value, file=self.file, key=self.path(name))

    def tables(self, name: builtins.str, *, required: builtins.bool = False) -> list[Table]:
        value = self.raw(name, _MISSING if required else [])
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise self.error(name, f"an array of tables ([[{self.path(name)}]])", value)
        return [Table(v, file=self.file, key=f"{self.path(name)}[{i}]") for i, v in enumerate(value)]

    def finish(self) -> None:
        unknown = sorted(set(self.data) - self._seen)
        if unknown:
            near = difflib.get_close_matches(unknown[0], sorted(self._seen), n=1)
            hint = f"did you mean {near[0]!r}?" if near else "see docs/configuration.md for every key"
            raise self.error(unknown[0], f"a known key ({hint})", None)

    def _check_range(
        self, name: builtins.str, value: builtins.float, lo: builtins.float | None, hi: builtins.float | None
    ) -> None:
        if lo is not None and value < lo:
            raise self.error(name, f"a value >= {lo}", value)
        if hi is not None and value > hi:
            raise self.error(name, f"a value <= {hi}", value)
