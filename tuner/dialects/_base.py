from __future__ import annotations

import abc
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tuner.dialects._capacity import KvCapacity, int_value
from tuner.dialects._counters import ServerSnapshot
from tuner.space import Param, SearchSpace, bool_argv

__all__ = ["BaseServerDialect", "Run", "Verdict", "VersionedFlags"]

# A long option as `--help` prints it: not preceded by a word character or a dash, so `--foo` inside
# `--no-foo` or `x--foo` is not taken for `--foo`.
_HELP_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z0-9][\w.-]*)")


Run = Callable[[Sequence[str]], "str | None"]
"""Runs one command on the server's host: its standard output, or None when it failed or timed out."""


@dataclass(frozen=True)
class Verdict:
    """One finding about a command or a space (``ok`` False: the server would refuse it; None: it starts, but
    look; True: fine)."""

    ok: bool | None
    text: str


class VersionedFlags(abc.ABC):
    """How a server's version is found and what that version's flag table says of a study."""

    @property
    @abc.abstractmethod
    def version(self) -> Any | None:
        """The version the dialect was given (``[target] server_version``), None until found on the host."""

    @abc.abstractmethod
    def pinned(self, name: str, reason: str) -> BaseServerDialect:
        """The dialect for the version ``name`` names; raises ValueError (what was expected) when it names none."""

    @abc.abstractmethod
    def detect(
        self, run: Run, program: Sequence[str], *, listed: frozenset[str] | None = None, quick: bool = False
    ) -> tuple[Any | None, str]:
        """(the version on the host, how it was found) or (None, why not); ``listed``: the flags ``--help``
        printed; ``quick`` (``tune start``): one short process only."""

    @abc.abstractmethod
    def version_line(self, version: Any, how: str) -> str:
        """The line that names a version found on the host."""

    @abc.abstractmethod
    def exact(self, version: Any) -> bool:
        """Whether ``version`` has its own flag table (not a neighbour's standing in): its verdicts on flag names
        are then refusals, and ``--help`` need not judge them again."""

    @abc.abstractmethod
    def not_found(self, how: str) -> str:
        """The line said when no version was found (``how``: what was tried)."""

    @abc.abstractmethod
    def table_verdicts(
        self, version: Any, command: Sequence[str], space: SearchSpace, env: Mapping[str, str], *, spellings: bool
    ) -> list[Verdict]:
        """What ``version``'s flag table says of the base command, the space and the environment (``spellings``:
        also of the flag names; off when a neighbour's table stands in and ``--help`` can judge them)."""

    @abc.abstractmethod
    def judged_flags(self, version: Any | None, command: Sequence[str], space: SearchSpace) -> set[str]:
        """The spellings the version's flag table had something to say about (``--help`` need not repeat it)."""

    @abc.abstractmethod
    def help_verdicts(
        self,
        listed: frozenset[str],
        command: Sequence[str],
        space: SearchSpace,
        *,
        judged: set[str],
        version: Any | None,
    ) -> list[Verdict]:
        """Flags of the base command and the space the live ``--help`` does not list."""

    @abc.abstractmethod
    def refusal(self, version: Any) -> str:
        """What a refused command should be instead (the ConfigError's ``expected``)."""

    @abc.abstractmethod
    def init_check(
        self, command: Sequence[str], env: Mapping[str, str], server_version: str
    ) -> tuple[BaseServerDialect, list[Verdict], str]:
        """``tune init``: (the dialect for the version the command is checked against, what that version says of
        the command, what a refused command should be instead); ValueError for a ``server_version`` that names
        no version."""


class BaseServerDialect(abc.ABC):
    """What differs between inference servers that `tune` talks to (the server-dialect seam).

    A dialect is pure data plus a few small methods: it never opens a connection itself. Readiness, the
    benchmark, the space renderer and ``tune check`` ask it where to look and how to write things. A
    capability a server lacks is ``None`` (or ``False``) here, and :meth:`missing` says in plain words what
    `tune` does instead, so a user sees it once at start rather than finding it in JSON.
    """

    name: ClassVar[str]
    health_path: ClassVar[str | None] = None
    """200 when the server is up (still not readiness: a real generation is the final proof)."""
    phase_markers: ClassVar[tuple[tuple[str, str], ...]] = ()
    """(phase label, regex) in startup order, shown on the progress line while the server loads."""
    fatal_patterns: ClassVar[tuple[str, ...]] = ()
    """Log lines that mean this start has failed, added to the generic ones (Traceback, OOM, ...)."""
    flush_path: ClassVar[str | None] = None
    """POST here resets the prefix cache between repeats."""
    acceptance: ClassVar[str | None] = None
    """Where speculative acceptance comes from: ``server_info`` (SGLang: its Prometheus counters with
    ``--enable-metrics``, ``/server_info`` as the server-wide fallback), ``prometheus`` (vLLM), None."""
    metrics_path: ClassVar[str | None] = None
    """Where the server's Prometheus counters are (read by :meth:`read_counters`)."""
    info_paths: ClassVar[tuple[str, ...]] = ()
    """Where the server's own JSON state is, under each name it has had (asked in order; the first that answers
    is kept), for :meth:`read_counters`."""
    stream_usage: ClassVar[bool] = True
    """Whether streamed responses carry ``usage`` token counts."""
    tokenize_path: ClassVar[str | None] = None
    """A server endpoint that counts the tokens of a text (used when streams carry no usage)."""
    bool_style: ClassVar[str] = "switch"
    """How a boolean flag is written: ``switch`` (``--flag``), ``value`` (``--flag true``), ``negatable``
    (``--flag`` / ``--no-flag``)."""
    help_args: ClassVar[tuple[str, ...]] = ("--help",)
    """Appended to the program to make it list every flag."""
    port_flag: ClassVar[str] = "--port"
    host_flag: ClassVar[str] = "--host"
    default_port: ClassVar[int | None] = None
    flag_separator: ClassVar[str | None] = None
    """How words inside a flag name are joined (``-`` for SGLang/vLLM, ``_`` for llama-cpp-python)."""
    json_keys: ClassVar[dict[str, frozenset[str]]] = {}
    """The JSON-valued flags this server takes and the keys each object knows."""
    tunable: ClassVar[tuple[dict[str, Any], ...]] = ()
    """Speculative-decoding knobs `tune init` suggests: one [space.NAME] table each (``name`` + its keys), and
    ``requires`` = (flag, value or None): suggested only when the launch command has that flag (with that value;
    a tuple of values: with one of them in the flag's comma-separated list)."""
    context_flags: ClassVar[tuple[str, ...]] = ()
    """Flags that set the tokens a request may hold (prompt, output and the drafts' extra ones); ``tune init``
    sizes its scenarios to them."""
    slot_flags: ClassVar[tuple[str, ...]] = ()
    """Flags that split that context between parallel slots (llama-server's ``-np``)."""
    default_slots: ClassVar[int] = 1
    """The slots that share the context when the command sets none."""
    batch_cap_flags: ClassVar[tuple[str, ...]] = ()
    """Flags that cap the requests the server runs at once (SGLang's ``--max-running-requests``, vLLM's
    ``--max-num-seqs``, llama-server's ``-np``), which the client can reproduce: one server start at the largest
    cap tried, the open-loop client's ``max_concurrency`` playing each smaller one (``[search] emulate``). Empty:
    every value of such a flag costs a restart."""
    draft_lengths: ClassVar[tuple[str, ...]] = ()
    """The :attr:`tunable` knobs whose value is how many extra tokens a step drafts: the context a request needs
    beyond its prompt and output."""
    tunable_constraints: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    """``(left, op, right)`` between :attr:`tunable` knobs, written by `tune init` when both are suggested."""
    model_flags: ClassVar[tuple[str, ...]] = ("--model-path", "--model", "--speculative-draft-model-path")
    """Flags whose values name the model files served: a fleet's workers must serve the same ones
    (:meth:`served_models`). Part of a study's stored target fingerprint, so a dialect's list changes only with a
    way to read the fingerprints studies already hold."""
    map_axes: ClassVar[tuple[str, str] | None] = None
    """Two knobs (each a flag or an env var) that read best together on the report's score map, whatever the
    importances say (SGLang: DDTree's budget x top-k); None: the map takes the two most important."""

    init_concurrency: ClassVar[int] = 4
    """The concurrency of the scenarios ``tune init`` writes."""

    def __init__(self, *, reason: str = "") -> None:
        self.reason = reason
        """Why this dialect was chosen (``[target] server = ...`` or what the launch command showed)."""

    @classmethod
    @abc.abstractmethod
    def matches(cls, argv: Sequence[str]) -> str | None:
        """What in ``argv`` shows this server's launch command (for the report), or None."""

    def tunable_for(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[dict[str, Any], ...]:
        """The :attr:`tunable` entries for this launch command (a dialect may adapt them to it)."""
        return self.tunable

    def init_command(self, argv: Sequence[str]) -> tuple[list[str], list[str]]:
        """``tune init``: the launch command as this server takes it today, and a note for each change made."""
        return list(argv), []

    def init_space(self, entries: list[dict[str, Any]], argv: Sequence[str]) -> list[dict[str, Any]]:
        """``tune init``: the suggested knobs (already fitted to ``argv``) as the study file writes them."""
        return entries

    def map_axes_for(self, params: Sequence[Param]) -> tuple[str, str] | None:
        """The names of the space's two :attr:`map_axes` parameters among ``params`` (None: not both there)."""
        if self.map_axes is None:
            return None
        by_key = {k: p.name for p in params for k in (p.flag, p.env) if k}
        x, y = self.map_axes
        return (by_key[x], by_key[y]) if x in by_key and y in by_key else None

    def constraints_for(self, names: Sequence[str]) -> list[tuple[str, str, str]]:
        """The :attr:`tunable_constraints` between knobs that are all among the suggested ``names`` (``tune init``)."""
        return [c for c in self.tunable_constraints if c[0] in names and c[2] in names]

    def served_models(self, argv: Sequence[str]) -> dict[str, str]:
        """The model files a launch command serves: each :attr:`model_flags` flag it spells out (without its
        dashes) and the value after it."""
        return {flag.lstrip("-"): argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag in self.model_flags}

    def emulates(self, param: Param) -> bool:
        """Whether ``param`` is a batch cap the client can play (its flag is one of :attr:`batch_cap_flags`)."""
        return any(f in self.batch_cap_flags for f in (param.flag, *param.aliases) if f)

    def bool_args(self, flag: str, value: bool) -> list[str]:
        """The argv elements for a boolean flag set to ``value`` (maybe none)."""
        return bool_argv(self.bool_style, flag, value)

    def listed_flags(self, help_text: str) -> set[str]:
        """Every long option the server's ``--help`` output names."""
        return set(_HELP_FLAG.findall(help_text))

    def token_count_request(self, text: str, model: str) -> dict[str, Any]:
        """The JSON body that asks :attr:`tokenize_path` to count ``text``'s tokens."""
        return {"model": model, "prompt": text}

    def token_count(self, answer: Any) -> int | None:
        """The token count from the tokenizer endpoint's JSON answer (None if it is not there)."""
        if isinstance(answer, dict):
            if isinstance(answer.get("count"), int):
                return int(answer["count"])
            if isinstance(answer.get("tokens"), list):
                return len(answer["tokens"])
        return None

    def lint(self, space: SearchSpace) -> list[str]:
        """What in a search space this server would reject, found without asking it: each problem, in words."""
        problems = []
        wrong = {"-": "_", "_": "-"}.get(self.flag_separator or "")
        for p in space.params:
            for flag in (p.flag, *p.aliases, p.json_flag):
                if flag and wrong and wrong in flag.lstrip("-"):
                    problems.append(
                        f"[space.{p.name}] {flag}: {self.name} flags join words with '{self.flag_separator}'"
                    )
            if p.json_flag and self.json_keys:
                keys = self.json_keys.get(p.json_flag)
                if keys is None:
                    known = ", ".join(sorted(self.json_keys))
                    problems.append(f"[space.{p.name}] json_flag {p.json_flag}: {self.name} takes JSON in {known}")
                elif p.key not in keys:
                    problems.append(
                        f"[space.{p.name}] key {p.key!r}: not a {p.json_flag} key (known: {', '.join(sorted(keys))})"
                    )
        return problems

    def command_problems(self, argv: Sequence[str]) -> list[str]:
        """What in the launch command this server rejects at start (a removed flag, ...), each in words."""
        return []

    def command_notes(self, argv: Sequence[str]) -> list[str]:
        """What in the launch command this server would ignore, or what it lacks for `tune` to measure it."""
        return []

    def read_counters(self, metrics: str, info: Mapping[str, Any] | None) -> ServerSnapshot:
        """What the server's counters say of speculative acceptance at one instant: ``metrics`` is the Prometheus
        text of :attr:`metrics_path` ("" when it has none or did not answer), ``info`` the JSON object one of
        :attr:`info_paths` answered (None: none did). Empty (the default): acceptance is not measured."""
        return ServerSnapshot()

    def versions(self) -> VersionedFlags | None:
        """How this server's version is found and what its flag table says of a study; None (the default): the
        server has no versions `tune` knows, ``--help`` alone judges its flags."""
        return None

    def inert(self, argv: Sequence[str], env: Mapping[str, str]) -> frozenset[str]:
        """The flags and environment variables of a launch command that change nothing the server does.

        Two configs that differ only in these are one config: a study runs it once and never races it against
        itself. Empty unless the dialect knows its server's rule from the server's own code.
        """
        return frozenset()

    def missing(self) -> list[str]:
        """Each capability this server lacks, and what `tune` does instead."""
        out = []
        if self.health_path is None:
            out.append("no health endpoint: readiness is a real generation only")
        if not self.phase_markers:
            out.append("no startup log markers: progress shows 'starting' until ready")
        if self.flush_path is None:
            out.append("no cache flush: repeats may reuse the prefix cache (prompts are unique per request)")
        if self.acceptance is None:
            out.append("no speculative acceptance counters: accept_length stays empty")
        if not self.stream_usage:
            if self.tokenize_path:
                out.append(f"streams carry no token usage: output is counted with {self.tokenize_path}")
            else:
                out.append("no tokenizer endpoint: a stream without usage has its output tokens estimated")
        return out

    def describe(self) -> list[str]:
        """Lines printed once at start and by ``tune check``: the dialect, why, and what it lacks."""
        head = f"server dialect: {self.name}" + (f" ({self.reason})" if self.reason else "")
        return [head, *(f"  missing: {m}" for m in self.missing())]

    # -- capacity: how many tokens the server holds for its requests (tuner.dialects._capacity) ----------------

    capacity_paths: ClassVar[tuple[str, ...]] = ()
    """GET endpoints where the server states its context (and KV pool); :meth:`server_capacity` reads them."""
    template_path: ClassVar[str | None] = None
    """POST ``{"messages": [...]}`` here answers ``{"prompt": ...}``: the chat as the server's template wraps it
    (then counted with :attr:`tokenize_path`), so a chat request's prompt is measured in the server's tokens."""

    def command_capacity(self, argv: Sequence[str], env: Mapping[str, str]) -> KvCapacity | None:
        """What the launch flags say of the server's capacity (None: they say nothing). By default the first of
        :attr:`context_flags` is one request's context, and requests beyond the slots wait rather than fail."""
        for flag in self.context_flags:
            context = int_value(argv, (flag,), env)
            if context is not None and context > 0:
                return KvCapacity(request=context, source=f"{flag} {context}")
        return None

    def server_capacity(
        self, answers: Mapping[str, Any], argv: Sequence[str], env: Mapping[str, str]
    ) -> KvCapacity | None:
        """What the server's own answers at :attr:`capacity_paths` (path -> parsed JSON, for those that
        answered) say of its capacity, read with the launch command for what they leave out; None: nothing."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
