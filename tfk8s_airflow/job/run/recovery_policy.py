"""The spec's recovery fields as the job's watch applies them (docs/recovery.md).

Why a module of its own: the job record carries this policy to the triggerer, and the recovery
planner (:mod:`tfk8s_airflow.job.run.recovery`) reads attempts from the records; kept apart, the
records and the planner import it without importing each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfk8s_airflow.job import defaults
from tfk8s_airflow.job.spec import TFJobSpec
from tfk8s_airflow.job.spec.quantity import quantity_to_float

__all__ = ["RecoveryPolicy"]


@dataclass(frozen=True)
class RecoveryPolicy:
    """The spec's recovery fields (plain data: it travels to the triggerer in the job record)."""

    group_restarts: int = defaults.GROUP_RESTARTS
    infra_restarts: int = defaults.INFRA_RESTARTS
    restart_backoff: float = float(defaults.RESTART_BACKOFF_S)
    progress_timeout: float | None = None
    node_lost_grace: float = float(defaults.NODE_LOST_GRACE_S)
    oom_memory_factor: float | None = None
    max_memory: float | None = None  # bytes
    exit_code_roles: tuple[str, ...] = ()  # roles with restart_policy ExitCode
    max_restarts: int = defaults.MAX_RESTARTS  # how often ExitCode recreates one replica's pod

    @classmethod
    def from_spec(cls, spec: TFJobSpec) -> RecoveryPolicy:
        return cls(exit_code_roles=tuple(r.role for r in spec.active_roles if r.restart_policy == "ExitCode"),
                   max_restarts=spec.max_restarts,
                   group_restarts=spec.group_restarts, infra_restarts=spec.infra_restarts,
                   restart_backoff=float(spec.restart_backoff),
                   progress_timeout=float(spec.progress_timeout) if spec.progress_timeout else None,
                   node_lost_grace=float(spec.node_lost_grace), oom_memory_factor=spec.oom_memory_factor,
                   max_memory=quantity_to_float(spec.max_memory) if spec.max_memory else None)

    def to_dict(self) -> dict[str, Any]:
        """As it travels in the job record: plain JSON types (a tuple comes back from XCom as a list)."""
        out = dataclasses.asdict(self)
        out["exit_code_roles"] = list(self.exit_code_roles)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> RecoveryPolicy:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in (d or {}).items() if k in known}
        if "exit_code_roles" in values:
            values["exit_code_roles"] = tuple(values["exit_code_roles"])
        return cls(**values)
