"""Whether a study's requests fit the server: each scenario's largest request, times the requests that hold KV at
once, against what the server holds (:mod:`tuner.dialects._capacity` for the arithmetic).

The server's own figures win where it answers (its dialect's ``capacity_paths``; the prompts the scenario sends,
counted by its tokenizer, through its chat template); the launch flags are read otherwise, and a prompt is then
counted at its lower bound: a whitespace-separated word is at least one token, plus :data:`MARKUP` for the request
tag and the chat template's markers. ``tune check`` refuses a study that does not fit; ``tune init`` sizes one
that does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from tuner.bench._prompts import build_prompt
from tuner.config import Scenario, StudyConfig, chat_text, load_chats, tag_chat
from tuner.dialects import BaseServerDialect, KvCapacity, RequestSize, int_value

__all__ = ["MARKUP", "Fit", "LiveServer", "draft_extra", "study_fits"]

MARKUP = 8
"""Tokens a prompt holds beyond its words, at the least: the request tag (``r1a2b3c4:`` is one word, several
tokens) and a chat template's role markers. Measured on SmolLM2-135M's llama-server: 39 (9 for the tag, 30 for
its template's default system prompt), so this is a floor, not an estimate."""
_SAMPLE = 8
"""Random-word prompts counted per scenario: their lengths differ by a token or two."""
_CHATS = 400
"""Chats counted at most per workload (HumanEval has 164); the largest decides."""


@dataclass(frozen=True, kw_only=True)
class Fit:
    """One scenario against the server's capacity."""

    scenario: str
    size: RequestSize
    streams: int
    problem: str | None

    def line(self) -> str:
        return f"scenario {self.scenario}: {self.problem}"


def draft_extra(config: StudyConfig) -> int:
    """Tokens a verification step adds beyond the answer so far: the largest draft length the base command or the
    space tries, plus the token it verifies (0 when nothing drafts)."""
    dialect = config.dialect
    flags = [e["flag"] for e in dialect.tunable if e["name"] in dialect.draft_lengths and "flag" in e]
    found = [int_value(config.target.command, (f,), config.target.env) or 0 for f in flags]
    for p in config.space.params:
        if p.flag in flags:
            values = [p.high] if p.high is not None else [c for c in p.choices if isinstance(c, int | float)]
            found += [int(v) for v in values if v is not None]
    most = max(found, default=0)
    return most + 1 if most else 0


def _concurrency(scenario: Scenario) -> int:
    """The requests of a scenario that can be in flight at once (an open loop without a cap: any number)."""
    if scenario.open_loop:
        return scenario.max_concurrency or 1_000_000
    return scenario.concurrency


def _chats(scenario: Scenario) -> list[list[dict[str, str]]] | None:
    """The chats a scenario may send (tagged as the benchmark tags them), None for random words."""
    if scenario.prompts == "random" or scenario.trace is not None:
        return None
    return [tag_chat(chat, seed=i) for i, chat in enumerate(load_chats(scenario.prompts)[:_CHATS])]


def _words(scenario: Scenario) -> int:
    chats = _chats(scenario)
    if chats is None:
        return scenario.prompt_tokens
    return max(len(chat_text(c).split()) for c in chats)


def floor_size(scenario: Scenario, drafts: int) -> RequestSize:
    """A request's size counted without the server: its words (each at least one token) and :data:`MARKUP`."""
    return RequestSize(prompt=_words(scenario) + MARKUP, output=scenario.output_tokens, drafts=drafts,
                       measured=f"at least: {_words(scenario)} words + {MARKUP}")  # fmt: skip


class LiveServer:
    """A running server asked what it holds and how many tokens a prompt is (``None`` answers: it cannot say)."""

    def __init__(self, *, url: str, dialect: BaseServerDialect, client: httpx.Client) -> None:
        self._url = url.rstrip("/")
        self._dialect = dialect
        self._client = client

    def _json(self, path: str, body: Any = None) -> Any:
        try:
            url = self._url + path
            r = self._client.post(url, json=body) if body is not None else self._client.get(url)
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        try:
            return r.json()
        except ValueError:
            return None

    def capacity(self, argv: Sequence[str], env: Mapping[str, str]) -> KvCapacity | None:
        answers = {p: a for p in self._dialect.capacity_paths if (a := self._json(p)) is not None}
        return self._dialect.server_capacity(answers, argv, env) if answers else None

    def tokens(self, text: str) -> int | None:
        path = self._dialect.tokenize_path
        if path is None:
            return None
        return self._dialect.token_count(self._json(path, self._dialect.token_count_request(text, "")))

    def prompt_tokens(self, messages: list[dict[str, str]], *, api: str) -> int | None:
        """A request's prompt in the server's tokens: through its chat template (``api = "chat"``), plus one for a
        BOS token the count may leave out."""
        text = chat_text(messages)
        if api == "chat":
            if self._dialect.template_path is None:
                return None
            wrapped = self._json(self._dialect.template_path, {"messages": messages})
            prompt = wrapped.get("prompt") if isinstance(wrapped, dict) else None
            if not isinstance(prompt, str):
                return None
            text = prompt
        count = self.tokens(text)
        return count + 1 if count is not None else None

    def size(self, scenario: Scenario, *, api: str, seed: int, drafts: int) -> RequestSize | None:
        """The scenario's largest request, its prompt counted by the server on the prompts it sends."""
        chats = _chats(scenario)
        if chats is None:
            chats = [
                [{"role": "user", "content": build_prompt(tokens=scenario.prompt_tokens, seed=seed,
                                                          scenario=scenario.name, phase="measure", repeat=0, index=i)}]
                for i in range(min(_SAMPLE, scenario.requests))
            ]  # fmt: skip
        counts = [self.prompt_tokens(m, api=api) for m in chats]
        if not counts or any(c is None for c in counts):
            return None
        most = max(c for c in counts if c is not None)
        how = "the server's tokens" + (", chat template included" if api == "chat" else "")
        return RequestSize(prompt=most, output=scenario.output_tokens, drafts=drafts, measured=how)


def study_fits(config: StudyConfig, *, live: LiveServer | None = None) -> tuple[KvCapacity | None, list[Fit]]:
    """The capacity (the server's, else the command's; None: neither says) and each scenario's fit in it."""
    command, env = config.target.command, config.target.env
    said = live.capacity(command, env) if live else None
    live = live if said is not None else None  # a server that does not say its capacity is not asked more
    capacity = said or config.dialect.command_capacity(command, env)
    if capacity is None:
        return None, []
    drafts = draft_extra(config)
    fits = []
    for s in config.benchmark.scenarios:
        if s.trace is not None:
            continue  # a trace's requests are its own; not sized here
        size = live.size(s, api=config.benchmark.api, seed=config.benchmark.seed, drafts=drafts) if live else None
        size = size or floor_size(s, drafts)
        conc = _concurrency(s)
        fit = Fit(scenario=s.name, size=size, streams=capacity.streams(conc), problem=capacity.problem(size, conc))
        fits.append(fit)
    return capacity, fits
