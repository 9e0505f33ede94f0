"""A stand-in for ``python -m sglang.launch_server`` whose ``--help`` and parsing are argparse built from a
flag table (SGLang's own option registrations, read from its wheel): no GPU, no torch, nothing served.

It prints what ``prog --help`` prints for those options (argparse's default formatter, as SGLang's parser
uses; hidden options stay hidden) and exits 2 on what SGLang's parser refuses. It does not answer
``--version`` (neither does ``sglang.launch_server``) and has no ``sglang`` package behind it, so version
detection on it falls through to ``--help``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tuner.dialects import sglang_table

_PROGRAM = """\
import argparse, json, sys
table = json.load(open({table!r}))
parser = argparse.ArgumentParser(prog=table["parser"]["prog"], allow_abbrev=table["parser"]["allow_abbrev"])
for o in table["options"]:
    text = argparse.SUPPRESS if o["hidden"] else (o["help"] or "").replace("%", "%%")
    if o["nargs"] == 0:
        parser.add_argument(*o["flags"], dest=o["dest"], action="store_true", help=text)
    else:
        choices = o["choices"] if o["type"] == "str" else None
        parser.add_argument(*o["flags"], dest=o["dest"], nargs=o["nargs"], choices=choices, help=text)
parser.parse_args()
print("fake sglang: would start now", file=sys.stderr)
"""


def fake_sglang(folder: Path, version: str = "0.5.23") -> list[str]:
    """Write the stand-in into ``folder``; the program part of a launch command that runs it."""
    from importlib import resources

    table = resources.files("tuner.dialects").joinpath("sglang_flags", f"{sglang_table(version).name}.json")
    script = folder / "fake_sglang_launch_server.py"
    script.write_text(_PROGRAM.format(table=str(table)))
    return [sys.executable, str(script)]
