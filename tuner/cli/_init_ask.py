"""``tune init`` asks the server what it holds: its capacity, and the prompts the study will send counted in its
tokens (see :mod:`tuner.cli._init_sizing`). A server that already answers on the command's port is asked; with
``--ask-server`` one that does not is started once, through the target like any trial (and stopped again).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tuner.cli._init_sizing import Measured
from tuner.config import StudyConfig
from tuner.errors import TuneError

__all__ = ["ask_server"]


def _measure(config: StudyConfig, url: str, seconds: float | None) -> Measured | None:
    """The server's capacity and the study's prompts in its tokens; None when it cannot say them all."""
    import httpx

    from tuner.bench import LiveServer

    command, env = config.target.command, config.target.env
    with httpx.Client(timeout=30.0, trust_env=False) as client:
        live = LiveServer(url=url, dialect=config.dialect, client=client)
        capacity = live.capacity(command, env)
        if capacity is None:
            return None
        api, seed = config.benchmark.api, config.benchmark.seed
        chat = next(s for s in config.benchmark.scenarios if s.prompts == "random" and not s.open_loop)
        code = next(s for s in config.benchmark.scenarios if s.prompts == "humaneval")
        chat_size = live.size(chat, api=api, seed=seed, drafts=0)
        code_size = live.size(code, api=api, seed=seed, drafts=0)
    if chat_size is None or code_size is None:
        return None
    return Measured(capacity=capacity, overhead=chat_size.prompt - chat.prompt_tokens, code_prompt=code_size.prompt,
                    seconds=seconds)  # fmt: skip


def ask_server(text: str, *, start: bool) -> Measured | None:
    """What the server of the study ``text`` says (module docstring); None: flags only."""
    from tuner.config import parse_config

    config = parse_config(text, source="(tune init)", base_dir=Path("."))
    measured = _measure(config, config.target.base_url, None)
    if measured is not None or not start:
        if measured is not None:
            print(f"tune init: asked the server running at {config.target.base_url}", file=sys.stderr)
        return measured
    from tuner.target import open_target

    print("tune init: starting the server once to ask its context and count prompts in its tokens", file=sys.stderr)
    began = time.monotonic()
    try:
        with open_target(config) as target, target.locked():
            try:
                up = target.bring_up(None, label="tune-init", progress=lambda m: print(f"   {m}", file=sys.stderr))
                seconds = time.monotonic() - began
                print(f"tune init: the server answered after {seconds:.1f} s", file=sys.stderr)
                return _measure(config, (up.ready.endpoint or target.endpoint).base_url, seconds)
            finally:
                target.service.revert()
                target.service.stop()
    except TuneError as exc:
        print(f"tune init: could not ask the server ({exc}); sized from the command's flags", file=sys.stderr)
        return None
