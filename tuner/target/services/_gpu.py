"""Wait until the GPUs' memory is released before starting the next configuration.

A stopped SGLang process can hold its ~72 GB per GPU for seconds after exit while the driver tears down its
contexts; a new server started into that fails with an out-of-memory error that looks like a bad config.
The seed's wait timed out "but proceeded anyway"; this one fails the trial with the readings as evidence.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tuner.config import GpuWaitSection
from tuner.errors import HostError, Phase, TrialFailure
from tuner.target.hosts import BaseHost
from tuner.wait import wait_until

__all__ = ["GpuBusy", "parse_gpu_memory", "read_gpu_memory", "wait_gpu_free"]

Progress = Callable[[str], None]


class GpuBusy(TrialFailure):
    """GPU memory was still in use when the wait ran out."""

    phase = Phase.RESTART


def parse_gpu_memory(text: str) -> list[float]:
    """MiB used per GPU from ``nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits`` output.

    Tolerates a ``MiB`` unit and blank lines; anything else is an error (a driver message such as "No devices
    were found" must not read as "0 MiB used").
    """
    values: list[float] = []
    for line in text.splitlines():
        item = line.strip().removesuffix("MiB").strip()
        if not item:
            continue
        values.append(float(item))
    return values


def read_gpu_memory(host: BaseHost, section: GpuWaitSection) -> list[float]:
    result = host.run(list(section.command), timeout=60)
    if not result.ok:
        raise HostError(
            f"`{result.command}` exited with status {result.exit_status} on {host.name}: "
            f"{(result.stderr or result.stdout).strip()[:500]}"
        )
    try:
        values = parse_gpu_memory(result.stdout)
    except ValueError:
        shown = result.stdout.strip()[:500]
        raise HostError(f"`{result.command}` printed no MiB figures: {shown!r}") from None
    if not values:
        raise HostError(f"`{result.command}` on {host.name} reported no GPUs")
    return values


def _fmt(values: list[float]) -> str:
    return ", ".join(f"GPU{i} {v:.0f} MiB" for i, v in enumerate(values))


def wait_gpu_free(
    host: BaseHost,
    section: GpuWaitSection,
    progress: Progress | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[float]:
    """Poll until every GPU uses less than ``below_mib``; return the final readings.

    Raises :class:`GpuBusy` (phase RESTART) with the last readings after ``timeout_s``. A command that
    fails is retried until the timeout too (the driver can be briefly unavailable while contexts close),
    and its error becomes the evidence if it never recovers.
    """
    history: list[str] = []
    last: dict[str, Any] = {"values": [], "error": ""}

    def released(elapsed: float) -> list[float] | None:
        try:
            values = read_gpu_memory(host, section)
        except HostError as exc:
            last.update(values=[], error=str(exc))
            return None
        last.update(values=values, error="")
        history.append(f"{elapsed:6.1f}s  {_fmt(values)}")
        if all(v < section.below_mib for v in values):
            if progress:
                progress(f"GPU memory released after {elapsed:.1f} s ({_fmt(values)})")
            return values
        return None

    def tick(elapsed: float) -> None:
        if progress:
            shown = _fmt(last["values"]) if last["values"] else last["error"]
            progress(f"waiting for GPU memory to drop below {section.below_mib:.0f} MiB: {shown}")

    values = wait_until(
        released, timeout=section.timeout_s, interval=section.poll_interval_s, on_tick=tick, clock=clock, sleep=sleep
    )
    if values is not None:
        return values
    busy = [f"GPU{i} {v:.0f} MiB" for i, v in enumerate(last["values"]) if v >= section.below_mib]
    reason = (
        f"GPU memory not released after {section.timeout_s:.0f} s: {', '.join(busy)} still in use "
        f"(threshold {section.below_mib:.0f} MiB)"
        if last["values"]
        else f"could not read GPU memory for {section.timeout_s:.0f} s: {last['error']}"
    )
    raise GpuBusy(reason, evidence="\n".join(history[-30:] + ([last["error"]] if last["error"] else [])))
