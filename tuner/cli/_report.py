"""`tune dashboard`, `tune report`, `tune export`: looking at a study and acting on its result."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from tuner.cli._common import add_study_args, study_location
from tuner.secrets import masked_url


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg,unused-ignore]
    p = sub.add_parser("dashboard", help="optuna-dashboard on the study, with infeasible trials marked")
    add_study_args(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=_port, default=8080, help="TCP port to listen on")
    p.add_argument(
        "--allow-edits",
        action="store_true",
        help="let the dashboard change the study: delete studies and trials, upload artifacts (default: read-only "
        "but for notes)",
    )
    p.set_defaults(func=_dashboard)

    p = sub.add_parser("report", help="a Markdown report with plots: best config, speed-ups, failures")
    add_study_args(p)
    p.add_argument(
        "--out", metavar="DIR", type=Path, default=None, help="output directory (default: runs/<study>/report)"
    )
    p.set_defaults(func=_report)

    p = sub.add_parser("export", help="the recommended config as a systemd drop-in, a command line or JSON")
    add_study_args(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--best", action="store_true", help="the recommended trial (the default)")
    which.add_argument("--trial", type=int, metavar="N", help="trial N instead (warned about when not recommended)")
    p.add_argument(
        "--format",
        choices=("dropin", "command", "json"),
        default="command",
        help="dropin: a systemd drop-in; command: one shell line; json: the trial, its figures and launch",
    )
    p.set_defaults(func=_export)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, got {port}")
    return port


def _open(args: argparse.Namespace) -> tuple[Any, Any, str]:
    from tuner.study import load_existing

    config, storage, name = study_location(args)
    return config, load_existing(storage, name), storage


def _dashboard(args: argparse.Namespace) -> int:
    from tuner.errors import EnvironmentFault
    from tuner.report import DashboardServer, write_study_note
    from tuner.trials.adapter import storage_of

    config, study, storage = _open(args)
    write_study_note(study, config)  # idempotent: also covers studies started before notes existed
    store = None
    if config.study.artifacts_dir is not None and Path(config.study.artifacts_dir).is_dir():
        from optuna.artifacts import FileSystemArtifactStore

        store = FileSystemArtifactStore(str(config.study.artifacts_dir))
    try:
        server = DashboardServer(
            storage=storage_of(study),
            artifact_store=store,
            host=args.host,
            port=args.port,
            configs={study.study_name: config},
            allow_edits=args.allow_edits,
        )
    except OSError as exc:  # the port is taken, or the address is not this machine's
        raise EnvironmentFault(
            f"the dashboard cannot listen on {args.host}:{args.port}: {(exc.strerror or str(exc)).lower()} "
            "(choose another --port or --host)"
        ) from None
    shown = masked_url(storage)
    mode = "with edits allowed" if args.allow_edits else "read-only but for notes"
    print(f"optuna-dashboard for {shown} (study {study.study_name}, {mode}) at {server.url}/dashboard  (Ctrl-C stops)",
          file=sys.stderr)  # fmt: skip
    if args.allow_edits:
        print("warning: --allow-edits: anyone who reaches this dashboard can delete the study and its trials and "
              "upload artifacts; a night's results are one click from gone", file=sys.stderr)  # fmt: skip
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print("warning: the dashboard has no authentication; prefer --host 127.0.0.1 with an SSH tunnel",
              file=sys.stderr)  # fmt: skip
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a dashboard is meant to stop
        server.serve_forever()
    return 0


def _report(args: argparse.Namespace) -> int:
    from tuner.cli._output import output_dir, writing
    from tuner.report import build_report

    config, study, storage = _open(args)
    out = output_dir(Path(args.out or config.base_dir / "runs" / study.study_name / "report"), option="--out")
    with writing(out, what=f"cannot write the report to {out}"):
        report = build_report(study, config, out, storage=storage)
    print(report.path)
    for name, why in report.skipped.items():
        print(f"  {name}: not drawn ({why})", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    from tuner.report import choose_trial, export_text, secrets_note, tune_command, verification_text
    from tuner.trials import Outcome, recommended

    config, study, storage = _open(args)
    chosen = choose_trial(study, args.trial)
    rec = recommended(study)
    if rec is None or rec.trial.number != chosen.number:
        print(f"warning: trial #{chosen.number} is not the recommended config: {Outcome.text(chosen)}", file=sys.stderr)
    elif unverified := verification_text(
        rec, finish=tune_command("finish", config, storage=storage, study=study.study_name)
    ):
        print(f"warning: trial #{chosen.number}: {unverified}", file=sys.stderr)
    if args.format == "command" and (note := secrets_note(config, chosen)):
        print(f"note: {note}", file=sys.stderr)  # stdout stays one line, for eval and shlex.split
    sys.stdout.write(export_text(study, config, fmt=args.format, trial=chosen.number))
    return 0
