"""Study configuration: TOML files validated into typed, frozen objects."""

from tuner.config._gate import GateSection
from tuner.config._launch import base_spec, launch_spec, spec_for
from tuner.config._load import StudyConfig, load_config, parse_config
from tuner.config._member import fleet_member
from tuner.config._objective import GOODPUT_METRICS, ObjectiveSection, register_objective_kind
from tuner.config._reader import Table
from tuner.config._sections import (
    WARMUPS,
    BenchmarkSection,
    GpuWaitSection,
    ReadinessSection,
    Scenario,
    SSHSection,
    SystemdSection,
    TargetSection,
    default_storage,
)
from tuner.config._slo import Slo, parse_slo_option
from tuner.config._traces import load_trace
from tuner.config._workloads import chat_text, load_chats, sample_chat, tag_chat

__all__ = [
    "GOODPUT_METRICS",
    "WARMUPS",
    "BenchmarkSection",
    "GateSection",
    "GpuWaitSection",
    "ObjectiveSection",
    "ReadinessSection",
    "SSHSection",
    "Scenario",
    "Slo",
    "StudyConfig",
    "SystemdSection",
    "Table",
    "TargetSection",
    "base_spec",
    "chat_text",
    "default_storage",
    "fleet_member",
    "launch_spec",
    "load_chats",
    "load_config",
    "load_trace",
    "parse_config",
    "parse_slo_option",
    "register_objective_kind",
    "sample_chat",
    "spec_for",
    "tag_chat",
]
