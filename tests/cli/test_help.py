"""What `tune --help`, `tune COMMAND --help`, `tune --version` and `tune sim --help` tell a new user."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

import tuner
from tuner.cli import build_parser


def _tune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, timeout=60)


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_version() -> None:
    run = _tune("--version")
    assert run.returncode == 0
    assert run.stdout.strip() == f"tune {tuner.__version__}"


@pytest.mark.parametrize("name", sorted(set(_commands()) - {"sim"}))
def test_every_option_has_help_and_shows_its_default(name: str) -> None:
    command = _commands()[name]
    text = command.format_help()
    for action in command._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        assert action.help, f"tune {name} {action.option_strings[0]} has no help text"
        if action.default not in (None, False) and not isinstance(action, argparse._HelpAction):
            shown = str(action.default)
            assert f"default: {shown}" in " ".join(text.split()) or "default" in action.help, (
                f"tune {name} {action.option_strings[0]}: its default {shown!r} is not shown"
            )


def test_defaults_of_port_format_and_out_are_shown() -> None:
    commands = _commands()
    flat = {name: " ".join(commands[name].format_help().split()) for name in ("dashboard", "export", "init")}
    assert "--port PORT TCP port to listen on (default: 8080)" in flat["dashboard"]
    assert "(default: command)" in flat["export"]
    assert "(default: study.toml)" in flat["init"]


def test_sim_help_names_tune_sim_and_the_server_keeps_sglangs_name() -> None:
    run = _tune("sim", "--help")
    assert run.returncode == 0
    assert run.stdout.startswith("usage: tune sim ")
    server = subprocess.run(
        [sys.executable, "-m", "tuner.sim", "--no-such-flag"], capture_output=True, text=True, timeout=60
    )
    # A launched simulator fails like the real server, in its words (SGLang 0.5.23's parser is "sglang serve").
    assert server.returncode == 2
    assert "sglang serve: error: unrecognized arguments: --no-such-flag" in server.stderr



@pytest.mark.parametrize("name", sorted(set(_commands()) - {"sim"}))
def test_no_help_shows_sphinx_markup(name: str) -> None:
    text = _commands()[name].format_help()
    assert ":func:" not in text and ":mod:" not in text and "``" not in text, name


def test_warm_start_help_says_what_the_default_does() -> None:
    text = " ".join(_commands()["start"].format_help().split())
    assert "its top configs first (all of it as the sampler's prior too with [search] warm_start_prior = true)" in text
