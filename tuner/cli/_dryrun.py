"""``tune start --dry-run N``: the launch commands a study would run first, without running anything.

Prints the baseline's and the next N distinct trials' exact launch commands, one shell line each as the host
would run them (the trial's environment as an ``env K=V`` prefix), using the sampling machinery of a real start
(``tuner.study.planned_launches``). No host is contacted and no storage is created, so it works on a laptop for
a study file written for a GPU box.
"""

from __future__ import annotations

import argparse

from tuner.config import StudyConfig

__all__ = ["add_dry_run_arg", "dry_run"]


def add_dry_run_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dry-run",
        metavar="N",
        type=int,
        default=None,
        help="print the baseline's and N sampled trials' launch commands; launch nothing, contact no host",
    )


def _where(config: StudyConfig) -> str:
    target = config.target
    host = "this machine"
    if target.transport == "ssh" and target.ssh is not None:
        host = f"{target.ssh.user}@{target.ssh.host}" if target.ssh.user else target.ssh.host
    if target.manager == "systemd" and target.systemd is not None:
        return f"on {host}, as systemd unit {target.systemd.unit} (each trial a drop-in: ExecStart + Environment)"
    return f"on {host}, as a process"


def dry_run(args: argparse.Namespace, config: StudyConfig) -> int:
    """Print the plan (see the module docstring); 0, or 2 for a negative N."""
    from tuner.errors import ConfigError
    from tuner.space import format_value
    from tuner.study import planned_launches, read_warm_start

    if args.dry_run < 0:
        raise ConfigError(file=None, key="--dry-run", expected="a number of trials >= 0", got=args.dry_run)
    warm = None
    if config.search.warm_start is not None:  # read, never written: the other study is where it was
        warm = read_warm_start(config, storage=args.storage or config.study.storage)
    launches = planned_launches(config, args.dry_run, warm=warm)
    print(f"# tune start --dry-run {args.dry_run} --config {config.source}: nothing is launched or stored")
    for line in warm.lines() if warm is not None else ():
        print(f"# {line}")
    for line in config.dialect.describe():
        print(f"# {line.strip()}")
    print(f"# each command runs {_where(config)}")
    for launch in launches:
        params = " ".join(f"{k}={format_value(v)}" for k, v in launch.params.items())
        print(f"# trial #{launch.number} ({launch.label}): {params}")
        print(launch.spec.shell_text())
    numbers = {launch.number for launch in launches}
    skipped = [n for n in range(max(numbers, default=0)) if n not in numbers]
    if skipped:
        print(f"# numbers skipped ({', '.join(f'#{n}' for n in skipped)}): samples a real start rejects without a "
              "launch, breaking a [[constraints]] rule or repeating a config already planned")  # fmt: skip
    sampled = len(launches) - 1
    if sampled < args.dry_run:
        print(f"# only {sampled} distinct configurations besides the baseline could be sampled")
    print("# trials after these depend on measured results (a dry run has none)")
    return 0
