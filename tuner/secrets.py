"""Which values of a launch configuration are secrets, and how every text `tune` writes loses them.

A secret reaches the server and nothing else. It lives in the study file (or the environment), the server gets
the real value, and everything `tune` writes or shows (trial attrs, the study file stored in the study, logs,
``status``/``best``/``report``/``export``, the dashboard, the notify summary) carries ``***`` instead.

What is a secret:

- the value of a flag whose name ends a word in ``key``, ``token``, ``secret`` or ``password`` (``--api-key``,
  ``--hf-token``, ``--admin-api-key``; not ``--max-total-tokens`` or ``--tokenizer-path``), or that the study
  lists in ``[target] secret_flags``;
- the value of an environment variable whose name has KEY, TOKEN, SECRET or PASSWORD at a word's end
  (``HF_TOKEN``, ``OPENAI_API_KEY``, ``PGPASSWORD``; not ``MAX_TOKENS``), or that the study lists in ``[target]
  secret_env``;
- ``[target] api_key``.

A flag or variable the search space tunes is never a secret: its values are what the study reports. Free text
(a failure's reason, a log tail) loses every known secret value of at least :data:`MIN_TEXT_SECRET` characters
(shorter ones would blank ordinary words); structured places (argv, environment) lose them whatever their length.

Dependency-free: the config, the loop, the report and the face all redact through one :class:`Secrets`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.errors import TrialFailure
from tuner.spec import LaunchSpec

__all__ = ["MIN_TEXT_SECRET", "REDACTED", "Secrets", "is_secret_env", "is_secret_flag", "masked_url"]

REDACTED = "***"
MIN_TEXT_SECRET = 4

_SECRET_WORD = re.compile(r"(key|token|secret|password)(?![a-z])", re.IGNORECASE)
# scheme://user:PASSWORD@host: up to the token's last "@" (an unencoded "@" in a password stays hidden too).
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*):[^\s'\"]*@")


def masked_url(text: str) -> str:
    """A storage URL (or a text or command line holding URLs) as people may see it: each password ``***``
    (``postgresql://tune:***@db/tune``)."""
    return _URL_PASSWORD.sub(rf"\1:{REDACTED}@", text)


def is_secret_flag(flag: str) -> bool:
    """Whether a flag's name says it carries a secret (``--api-key``, ``--hf-token``)."""
    return flag.startswith("-") and bool(_SECRET_WORD.search(flag.lstrip("-").split("=", 1)[0]))


def is_secret_env(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret (``HF_TOKEN``, ``PGPASSWORD``)."""
    return bool(_SECRET_WORD.search(name))


@dataclass(frozen=True, kw_only=True)
class Secrets:
    """The secret flags and variables of one study and the values they hold (see the module doc)."""

    flags: frozenset[str] = frozenset()
    """Flags listed as secret besides those whose name says so."""
    env: frozenset[str] = frozenset()
    """Environment variables listed as secret besides those whose name says so."""
    exempt: frozenset[str] = frozenset()
    """Flags and variables the search space tunes: never secrets."""
    values: tuple[str, ...] = field(default=())
    """The secret values known (the base command's, ``api_key``), longest first."""

    @classmethod
    def of(
        cls,
        spec: LaunchSpec,
        *,
        flags: Iterable[str] = (),
        env: Iterable[str] = (),
        exempt: Iterable[str] = (),
        values: Iterable[str | None] = (),
    ) -> Secrets:
        """The secrets of a base command, with the study's own lists and further known values."""
        rules = cls(flags=frozenset(flags), env=frozenset(env), exempt=frozenset(exempt))
        found = [
            *(v for _, _, v in rules._valued(spec.argv)),
            *(v for k, v in spec.env.items() if rules.is_env(k)),
            *values,
        ]
        known = sorted({v for v in found if v and v != REDACTED}, key=len, reverse=True)
        return cls(flags=rules.flags, env=rules.env, exempt=rules.exempt, values=tuple(known))

    def is_flag(self, flag: str) -> bool:
        name = flag.split("=", 1)[0]
        return name not in self.exempt and (name in self.flags or is_secret_flag(name))

    def is_env(self, name: str) -> bool:
        return name not in self.exempt and (name in self.env or is_secret_env(name))

    def _valued(self, argv: Sequence[str]) -> Iterator[tuple[int, str, str]]:
        """``(index, flag, value)`` of each secret flag's value in ``argv`` (``--flag VALUE`` or ``--flag=VALUE``);
        a secret-named flag without a value (``--enable-api-key``, then another flag) has none."""
        for i, arg in enumerate(argv):
            if not self.is_flag(arg):
                continue
            if arg.startswith("--") and "=" in arg:
                name, value = arg.split("=", 1)
                yield i, name, value
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                yield i + 1, arg, argv[i + 1]

    # -- redaction ----------------------------------------------------------------------------------------

    def argv(self, argv: Sequence[str]) -> tuple[str, ...]:
        """``argv`` with the value of every secret flag replaced by ``***`` (and known values in other args)."""
        hidden = {i: flag for i, flag, _ in self._valued(argv)}
        out = []
        for i, arg in enumerate(argv):
            if i not in hidden:
                out.append(self.text(arg))
            else:
                out.append(f"{hidden[i]}={REDACTED}" if arg.startswith(f"{hidden[i]}=") else REDACTED)
        return tuple(out)

    def env_map(self, env: Mapping[str, str]) -> dict[str, str]:
        return {k: REDACTED if self.is_env(k) else self.text(v) for k, v in env.items()}

    def spec(self, spec: LaunchSpec) -> LaunchSpec:
        """The spec as it may be shown and stored: every secret value ``***`` (never launch this one)."""
        return LaunchSpec(argv=self.argv(spec.argv), env=self.env_map(spec.env))

    def text(self, text: str) -> str:
        """Free text with every known secret value (and its shell-quoted form) replaced by ``***``."""
        for value in self.values:
            if len(value) < MIN_TEXT_SECRET:
                continue
            for form in dict.fromkeys((shlex.quote(value), value)):  # the quoted form first: it holds the other
                text = text.replace(form, REDACTED)
        return text

    def value(self, data: Any) -> Any:
        """A JSON-like value (strings in dicts and lists) with the secrets of every string redacted."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, Mapping):
            return {k: REDACTED if isinstance(k, str) and self.is_env(k) else self.value(v) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return [self.value(v) for v in data]
        return data

    def scrub(self, failure: TrialFailure) -> TrialFailure:
        """Redact a failure's reason and evidence in place (its message is built from them); returns it."""
        failure.reason = self.text(failure.reason)
        failure.evidence = self.text(failure.evidence)
        return failure

    # -- what an operator must supply ----------------------------------------------------------------------

    def names(self, spec: LaunchSpec) -> list[str]:
        """The secret flags and variables ``spec`` carries: what a deployment must be given the values of."""
        flags = [flag for _, flag, _ in self._valued(spec.argv)]
        return list(dict.fromkeys([*flags, *(k for k in spec.env if self.is_env(k))]))

    def placeholders(self, spec: LaunchSpec) -> list[str]:
        """The secret flags and variables of ``spec`` whose value is ``***`` (a configuration read back from a
        study, whose secrets were never stored): launching it would hand the server ``***``."""
        flags = [flag for _, flag, value in self._valued(spec.argv) if value == REDACTED]
        return [*flags, *(k for k, v in spec.env.items() if v == REDACTED)]
