"""The README and docs/ stay true to the tree: links resolve, written commands parse, named scripts exist.

Only what is written is checked: a command documented here must parse with the real CLI parser
(``tuner.cli.build_parser``; nothing is executed), so a doc that describes a command lands with the command.
Conventions the checks rely on:

* commands are checked where a reader would copy them: inline code spans that start with ``tune `` (or
  ``.venv/bin/tune ``), and lines of ``sh``/``bash``/``console`` code blocks that run ``tune``; ``text`` blocks
  quote output and are not checked;
* an all-capitals word is a placeholder (``N``, ``FILE``, ``HH:MM``) and parses as ``1``; ``...`` or ``…``
  abridges the rest of a command, and a shell operator (``|``, ``&&``, ``>``, ``#``...) ends it;
* ``tune sim`` hands its whole command line to the simulator, so its flags are checked with the simulator's parser.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuner.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_README_LINES = 300
LINKED = [README, ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMANDS = [README, *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w-]*)")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
_SPAN = re.compile(r"(`+)(.+?)\1")
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(:[A-Z]+)?$")
_SHELL_STOP = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1", "2>", "1>", "#"}
_SHELL_BLOCKS = {"sh", "bash", "shell", "console", ""}
_WRAPPERS = {"nohup", "setsid", "time", "sudo", "env", "exec"}
_ROOTED = r"(?:(?<=\./)|(?<![\w/.-]))"  # `scripts/x` or `./scripts/x`, not `tests/scripts/x`
_SCRIPT_PATH = re.compile(_ROOTED + r"(scripts/[\w./*-]*[\w*])")
_STUDY_PATH = re.compile(_ROOTED + r"(studies/[\w-]+\.toml)")


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- reading markdown ------------------------------------------------------------------------------------------


def _blocks(text: str) -> Iterator[tuple[str | None, int, str]]:
    """(code block language or None for prose, line number, line) for every line of a markdown file."""
    fence: str | None = None
    lang = ""
    for number, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence, lang = m.group(2), m.group(3).lower()
            continue
        if fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip(fence[0]).strip():
            fence = None
            continue
        yield (lang if fence is not None else None), number, line


def _prose(text: str) -> Iterator[tuple[int, str]]:
    for lang, number, line in _blocks(text):
        if lang is None:
            yield number, line


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for _, line in _prose(text):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


# -- links ------------------------------------------------------------------------------------------------------


def _links(text: str) -> Iterator[tuple[int, str]]:
    for number, line in _prose(text):
        line = _SPAN.sub("", line)  # a link inside a code span is an example, not a link
        for m in _LINK.finditer(line):
            yield number, m.group(1) or m.group(2)


def link_problems(path: Path, text: str | None = None) -> list[str]:
    """Every relative link of ``path`` (or of ``text`` written at ``path``) that does not lead to an existing file
    (and heading, with ``#anchor``)."""
    text = path.read_text() if text is None else text
    problems = []
    for number, target in _links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{_id(path)}:{number}: {target}"
        if not dest.exists() and file_part:
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text() if file_part else text):
            problems.append(f"{where}: no heading with anchor #{anchor} in {_id(dest)}")
    return problems


# -- commands ---------------------------------------------------------------------------------------------------


def _tune_argv(words: list[str]) -> list[str] | None:
    """The arguments after ``tune`` when a shell word list runs ``tune`` (after ``setsid``, ``VAR=value``...)."""
    i = 0
    while i < len(words) and (words[i] in _WRAPPERS or re.match(r"^[A-Z_][A-Z0-9_]*=", words[i])):
        i += 1
    if i + 1 >= len(words) or words[i].rsplit("/", 1)[-1] != "tune":
        return None
    argv = []
    for arg in words[i + 1 :]:
        if arg in _SHELL_STOP or arg.startswith("#") or arg in ("...", "…"):
            break
        argv.append("1" if _PLACEHOLDER.match(arg) else arg)
    return argv


def _shell_words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote: an example of output, not a command
        return []


def commands(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line, the text as written, the argv after ``tune``) for every ``tune`` command a markdown text shows."""
    for lang, number, line in _blocks(text):
        if lang is None:
            for m in _SPAN.finditer(line):
                span = m.group(2).strip()
                if re.match(r"^(\S*/)?tune \S", span):
                    argv = _tune_argv(_shell_words(span))
                    if argv:
                        yield number, span, argv
        elif lang in _SHELL_BLOCKS:
            text = line.strip().removeprefix("$ ")
            argv = _tune_argv(_shell_words(text))
            if argv:
                yield number, text, argv


def _parses(argv: list[str]) -> str | None:
    """None if the real parser accepts ``argv``, else its complaint."""
    if argv[0] == "sim":
        from tuner.sim import build_parser as sim_parser

        parser, argv = sim_parser(), argv[1:]
    else:
        parser = build_parser()
    complaint = _complaint(parser, argv)
    if complaint and "expected one argument" in complaint and argv[-1].startswith("-"):
        complaint = _complaint(parser, [*argv, "1"])  # prose names a flag (`tune start --trials`), not its value
    return complaint


def _complaint(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):  # --help exits 0
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exc.code}"
    return None


def command_problems(path: Path, text: str | None = None) -> list[str]:
    problems = []
    for number, written, argv in commands(path.read_text() if text is None else text):
        complaint = _parses(argv)
        if complaint:
            problems.append(f"{_id(path)}:{number}: `{written}`: {complaint}")
    return problems


# -- paths ------------------------------------------------------------------------------------------------------


def path_problems(path: Path, text: str | None = None) -> list[str]:
    """Every ``scripts/...`` or ``studies/*.toml`` path (or pattern) the file names that is not in the tree."""
    problems = []
    for lang, number, line in _blocks(path.read_text() if text is None else text):
        if lang == "text":  # quoted output: its paths are examples
            continue
        for pattern in (_SCRIPT_PATH, _STUDY_PATH):
            for m in pattern.finditer(line):
                if not any(ROOT.glob(m.group(1))):  # a pattern such as scripts/bench_*.py must match
                    problems.append(f"{_id(path)}:{number}: {m.group(1)} does not exist")
    return problems


# -- the tests --------------------------------------------------------------------------------------------------


def test_the_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; at most {MAX_README_LINES} (the rest: docs/)"


def test_the_docs_exist() -> None:
    names = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"configuration.md", "measuring.md", "servers.md", "fleet.md", "faults.md", "benchmarks.md"} <= names


@pytest.mark.parametrize("path", LINKED, ids=_id)
def test_every_relative_link_leads_somewhere(path: Path) -> None:
    assert link_problems(path) == []


@pytest.mark.parametrize("path", COMMANDS, ids=_id)
def test_every_written_command_parses(path: Path) -> None:
    assert command_problems(path) == []


def test_the_readme_shows_commands() -> None:
    """The command check must be checking something: the README's walkthrough is made of commands."""
    shown = {argv[0] for _, _, argv in commands(README.read_text())}
    assert {"init", "check", "start", "best", "report", "apply", "restore"} <= shown


@pytest.mark.parametrize("path", LINKED, ids=_id)
def test_every_named_script_and_study_exists(path: Path) -> None:
    assert path_problems(path) == []


def test_no_diary_in_the_tree() -> None:
    """History lives in the git log: no numbered sessions or stops in what users and contributors read."""
    diary = re.compile(r"session [0-9]+|stop [0-9]+", re.IGNORECASE)
    files = [README, *(ROOT / "docs").glob("*.md")]
    for folder, pattern in (("tuner", "*.py"), ("studies", "*.toml"), ("scripts", "*")):
        files += [p for p in (ROOT / folder).rglob(pattern) if p.is_file() and "runs" not in p.parts]
    found = [
        f"{_id(p)}:{n}: {m.group(0)}"
        for p in files
        if p.suffix not in (".pyc", ".db")
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        for m in diary.finditer(line)
    ]
    assert found == []


# -- the checks themselves ----------------------------------------------------------------------------------------


def test_the_checks_catch_a_broken_link_an_invented_flag_and_a_missing_script() -> None:
    doc = ROOT / "docs" / "probe.md"  # never written: the text is checked as if it lived there
    text = (
        "# Probe\n\n## A heading\n\n"
        "[ok](../README.md) [ok too](#a-heading) [gone](nowhere.md) [bad anchor](../README.md#no-such-heading)\n"
        "[no anchor here](#nowhere) `[a code span](gone.md)`\n\n"
        "Run `tune start --trials N --no-such-flag` or `tune best --json`; `tune start --trials` names a flag.\n\n"
        "```sh\n.venv/bin/tune status --json  # fine\ntune frobnicate\n```\n\n"
        "```text\ntune start --output-only-flag\nstudies/quoted.toml: a path in output\n```\n\n"
        "```sh\nsetsid .venv/bin/tune start --until 07:30 > night.log 2>&1 &\n"
        "python scripts/bench_search.py --strategies tune\n```\n\n"
        "See scripts/bench_nothing.py, scripts/bench_search.py and `./scripts/demos.sh`.\n"
    )
    links = [p.split(": ", 2)[2] for p in link_problems(doc, text)]
    assert links == [
        "no such file",
        "no heading with anchor #no-such-heading in README.md",
        "no heading with anchor #nowhere in docs/probe.md",
    ]
    cmds = command_problems(doc, text)
    assert len(cmds) == 2
    assert "--no-such-flag" in cmds[0] and "frobnicate" in cmds[1]
    assert [p.split(": ", 1)[1] for p in path_problems(doc, text)] == [
        "scripts/bench_nothing.py does not exist",
        "scripts/demos.sh does not exist",
    ]


def test_slugs_follow_github() -> None:
    assert _slug("Running it for real on a GPU host") == "running-it-for-real-on-a-gpu-host"
    assert _slug("`[target.ssh]`: SSH") == "targetssh-ssh"
    assert _slug("Environment vs config (exit 3)") == "environment-vs-config-exit-3"
