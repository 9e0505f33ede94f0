"""Readiness that cannot be fooled: the new process, a healthy endpoint, and a real generation."""

from tuner.target.readiness._wait import LogWatch, ReadinessCheck, Ready, wait_ready

__all__ = ["LogWatch", "ReadinessCheck", "Ready", "wait_ready"]
