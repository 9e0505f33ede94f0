"""Study configuration: TOML files validated into typed, frozen objects."""

from tuner.config._fleet import FleetHost
from tuner.config._gate import GateSection
from tuner.config._load import StudyConfig, load_config, parse_config
from tuner.config._member import fleet_member
from tuner.config._search import SearchSection
from tuner.config._sections import (
    ARRIVALS,
    GOODPUT_METRICS,
    WARMUPS,
    BenchmarkSection,
    GpuWaitSection,
    ObjectiveSection,
    ReadinessSection,
    Scenario,
    SSHSection,
    StudySection,
    SystemdSection,
    TargetSection,
    default_storage,
)
from tuner.config._slo import Slo, parse_slo_option
from tuner.config._traces import TraceRequest, load_trace
from tuner.config._workloads import chat_text, load_chats, sample_chat, tag_chat

__all__ = [
    "ARRIVALS",
    "GOODPUT_METRICS",
    "WARMUPS",
    "BenchmarkSection",
    "FleetHost",
    "GateSection",
    "GpuWaitSection",
    "ObjectiveSection",
    "ReadinessSection",
    "SSHSection",
    "Scenario",
    "SearchSection",
    "Slo",
    "StudyConfig",
    "StudySection",
    "SystemdSection",
    "TargetSection",
    "TraceRequest",
    "chat_text",
    "default_storage",
    "fleet_member",
    "load_chats",
    "load_config",
    "load_trace",
    "parse_config",
    "parse_slo_option",
    "sample_chat",
    "tag_chat",
]
