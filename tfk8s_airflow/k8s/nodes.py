"""The nodes of one job's pods, as its shared watch (:mod:`tfk8s_airflow.k8s.watch`) looks at them.

Why: a replica on a node that is NotReady or unreachable does not fail by itself; the recovery
planner (:mod:`tfk8s_airflow.job.run.recovery`) replaces it once the node has been lost longer
than the job's grace, so the watch notes since when each node of the job's pods is lost (one
LIST of nodes every :data:`NODE_CHECK_S`). The triggers ask whether a pod's node is one of KWOK's
simulated nodes (a pod there never really runs) to say so. Reading nodes is optional: a
deployment whose RBAC does not allow it gets no node-loss checks, and nothing fails.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tfk8s_airflow.job.run.judge import JobStatus
from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S

__all__ = ["NODE_CHECK_S", "SIMULATED_NODE_ANNOTATION", "NodeWatch", "node_lost"]

#: The annotation KWOK manages its simulated nodes by: pods there do not really run.
SIMULATED_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: Seconds between two looks at the nodes of the job's pods (node loss).
NODE_CHECK_S = 5.0


class NodeWatch:
    """The node checks of one job's watch: ``lost`` maps a lost node to when it was first seen lost."""

    def __init__(self) -> None:
        self.lost: dict[str, float] = {}
        self._meta: dict[str, dict[str, Any] | None] = {}
        self._checked = 0.0
        self._forbidden = False

    async def check(self, api: Any, status: JobStatus) -> None:
        """Which nodes of the job's pods are NotReady or unreachable, and since when."""
        if self._forbidden or time.monotonic() - self._checked < NODE_CHECK_S:
            return
        from kubernetes_asyncio import client as async_client

        self._checked = time.monotonic()
        names = {st.node for st in status.replicas.values() if st.node}
        if not names:
            return
        try:
            resp: Any = await async_client.CoreV1Api(api).list_node(_preload_content=False,
                                                                    _request_timeout=REQUEST_TIMEOUT_S)
            items = json.loads(await resp.read()).get("items") or []
        except async_client.ApiException as exc:
            if exc.status == 403:
                self._forbidden = True  # the deployment did not grant reading nodes: no node-loss checks
            return
        except (TimeoutError, OSError, ValueError):
            return
        now = time.time()
        for node in items:
            name = (node.get("metadata") or {}).get("name")
            if name not in names:
                continue
            self._meta[name] = node.get("metadata") or {}
            if node_lost(node):
                self.lost.setdefault(name, now)
            else:
                self.lost.pop(name, None)

    async def node(self, api: Any, name: str) -> dict[str, Any] | None:
        """A node's metadata (cached: one GET per node per watch); None when it cannot be read
        (the deployment's RBAC need not allow reading nodes, or ``api`` is None: no connection)."""
        if name in self._meta:
            return self._meta[name]
        from kubernetes_asyncio import client as async_client

        self._meta[name] = None
        if api is None:
            return None
        try:
            resp: Any = await async_client.CoreV1Api(api).read_node(name, _preload_content=False,
                                                                    _request_timeout=REQUEST_TIMEOUT_S)
            self._meta[name] = json.loads(await resp.read()).get("metadata") or {}
        except (TimeoutError, async_client.ApiException, OSError, ValueError):
            pass
        return self._meta[name]

    async def is_simulated(self, api: Any, node: str) -> bool:
        """Whether ``node`` is one of KWOK's simulated nodes."""
        meta = await self.node(api, node) or {}
        return (meta.get("annotations") or {}).get(SIMULATED_NODE_ANNOTATION) == "fake"


def node_lost(node: dict[str, Any]) -> bool:
    """NotReady, or unreachable (the node lifecycle controller's taint), as the API reports it."""
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            return True
    taints = (node.get("spec") or {}).get("taints") or []
    return any(t.get("key") in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready") for t in taints)
