from __future__ import annotations

import argparse
from pathlib import Path

from tuner.config import StudyConfig, load_config

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "studies" / "demo.toml"


def add_config_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        default=None,
        help=f"study file (default: {DEFAULT_CONFIG.name}, the demo)",
    )


def add_study_args(parser: argparse.ArgumentParser) -> None:
    add_config_arg(parser)
    parser.add_argument("--storage", metavar="URL", help="Optuna storage URL (default: the config's)")
    parser.add_argument("--study", metavar="NAME", help="study name (default: the config's)")


def config_from_args(args: argparse.Namespace) -> StudyConfig:
    return load_config(args.config or DEFAULT_CONFIG)


def study_location(args: argparse.Namespace) -> tuple[StudyConfig, str, str]:
    """The config, storage URL and study name a command addresses."""
    if args.config is None and args.storage is not None:
        from tuner.study import config_from_study, storage_faults

        with storage_faults(args.storage):
            config = config_from_study(args.storage, args.study)
        return config, args.storage, args.study or config.study.name
    config = config_from_args(args)
    return config, args.storage or config.study.storage, args.study or config.study.name
