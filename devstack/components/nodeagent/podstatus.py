"""A pod's status as the kubelet reports it: phase, conditions, container statuses.

Why a module of its own: what the API server (and so the job sensor) sees of a pod is a
contract of its own, built from the worker's state and pushed through ``pods/status`` only
when it changed. The conditions keep their last transition time as the kubelet's do.

:class:`PodStatus` is a mixin of :class:`podworker.PodWorker`, which owns the state read
here (names below).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from timestamps import iso, now

if TYPE_CHECKING:
    from agent import Agent
    from containers import Container


class PodStatus:
    """Builds the pod's status from the worker's state and pushes it when it changed."""

    # Set by the pod worker.
    agent: Agent
    pod: dict[str, Any]
    namespace: str
    pod_name: str
    phase: str
    reason: str | None
    message: str | None
    start_time: float
    finished: bool
    sandbox_ready: bool
    ip: str | None
    config_error: tuple[str, str] | None
    init_containers: list[Container]
    containers: list[Container]
    transitions: dict[str, tuple[str, float]]
    last_pushed: str | None

    def _cond(self, ctype: str, status: bool, reason: str | None = None) -> dict[str, Any]:
        value = "True" if status else "False"
        prev = self.transitions.get(ctype)
        if prev is None or prev[0] != value:
            self.transitions[ctype] = prev = (value, now())
        out = {"type": ctype, "status": value, "lastProbeTime": None, "lastTransitionTime": iso(prev[1])}
        if reason:
            out["reason"] = reason
        return out

    def ready(self) -> bool:
        return self.phase == "Running" and all(c.running for c in self.containers)

    def status(self) -> dict[str, Any]:
        if self.config_error:
            for c in self.containers:
                if c.proc is None and not c.done and "waiting" in c.state:
                    c.state = {"waiting": {"reason": self.config_error[0], "message": self.config_error[1]}}
        ready = self.ready()
        init_done = all(c.done and c.exit_code == 0 for c in self.init_containers)
        sched = [dict(c) for c in (self.pod.get("status") or {}).get("conditions") or []
                 if c.get("type") == "PodScheduled"]
        not_ready = "PodCompleted" if self.finished else "ContainersNotReady"
        conds = [self._cond("PodReadyToStartContainers", self.sandbox_ready),
                 self._cond("Initialized", init_done, None if init_done else "ContainersNotInitialized"),
                 self._cond("Ready", ready, None if ready else not_ready),
                 self._cond("ContainersReady", ready, None if ready else not_ready)] + sched
        st: dict[str, Any] = {
            "phase": self.phase, "conditions": conds,
            "hostIP": self.agent.node_ip, "hostIPs": [{"ip": self.agent.node_ip}],
            "startTime": iso(self.start_time),
            "containerStatuses": [c.status(ready) for c in self.containers],
            "reason": self.reason, "message": self.message,
        }
        if self.ip:
            st["podIP"], st["podIPs"] = self.ip, [{"ip": self.ip}]
        if self.init_containers:
            st["initContainerStatuses"] = [c.status(c.running) for c in self.init_containers]
        return st

    def _push(self, force: bool = False) -> None:
        st = self.status()
        text = json.dumps(st, sort_keys=True)
        if text == self.last_pushed and not force:
            return
        if self.agent.api.patch_status(self.namespace, self.pod_name, st):
            self.last_pushed = text
