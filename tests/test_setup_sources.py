"""scripts/setup.sh installs with uv, which reads no pip configuration: scripts/_pip_to_uv.py hands it the package
sources pip is configured with, the highest-precedence scope winning as in pip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "_pip_to_uv.py"


def _uv_args(pip_config: str) -> list[str]:
    done = subprocess.run([sys.executable, str(SCRIPT)], input=pip_config, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_every_source_pip_would_use_reaches_uv() -> None:
    args = _uv_args(
        "global.cert='/etc/ssl/certs/ca-certificates.crt'\n"
        "global.constraint='/etc/xdg/pip/constraints.txt'\n"
        "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'\n"
        "global.index-url='https://mirror.example/simple'\n"
        "global.trusted-host='mirror.example'\n"
        "global.default-timeout='180'\n"
    )
    assert args == [
        "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
        "--index-url", "https://mirror.example/simple",
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
        "--constraint", "/etc/xdg/pip/constraints.txt",
        "--allow-insecure-host", "mirror.example",
    ]  # fmt: skip


def test_the_environment_overrides_the_user_file_which_overrides_the_global_one() -> None:
    args = _uv_args(
        "global.find-links='/global/wheels'\n"
        ":env:.find-links='/env/wheels'\n"
        "user.index-url='https://user.example/simple'\n"
        "global.index-url='https://global.example/simple'\n"
        ":env:.no-index='true'\n"
    )
    assert args == ["--no-index", "--index-url", "https://user.example/simple", "--find-links", "/env/wheels"]


def test_no_configuration_adds_nothing() -> None:
    assert _uv_args("") == []
