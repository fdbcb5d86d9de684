"""This node as the API server knows it: the Node object, its status and its Lease.

Why a module of its own: the node's registration (labels, taint, capacity, the kubelet
endpoint the API server fetches logs from) and its heartbeat (a Lease in
``kube-node-lease`` every 10 s, the node status every 30 s) are what keeps the scheduler
binding pods here, whatever the pods do; on shutdown the node is marked NotReady and its
Lease deleted, so the node lifecycle controller sees it gone at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from typing import Any

from timestamps import iso, micro, now

log = logging.getLogger("nodeagent")


class NodeReporter:
    """Registers the Node, keeps it Ready (Lease and status) and marks it NotReady at the end."""

    def __init__(self, args: argparse.Namespace, core: Any, coord: Any, node_ip: str,
                 stopping: threading.Event) -> None:
        self.args = args
        self.node_name: str = args.node_name
        self.node_ip = node_ip
        self.core = core
        self.coord = coord
        self.stopping = stopping
        self._since: dict[str, tuple[str, str]] = {}

    def node_body(self) -> dict[str, Any]:
        a = self.args
        res = {"cpu": a.cpu, "memory": a.memory, "pods": str(a.pods), "ephemeral-storage": "100Gi"}
        labels = {"type": "local", "tfk8s.io/node-agent": "true", "kubernetes.io/hostname": self.node_name,
                  "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        spec: dict[str, Any] = {"podCIDR": a.subnet, "podCIDRs": [a.subnet]}
        if a.taint:
            spec["taints"] = [{"key": "tfk8s.io/node-agent", "value": "true", "effect": "NoSchedule"}]
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.node_name, "labels": labels,
                             "annotations": {"tfk8s.io/node-agent": "devstack/components/nodeagent",
                                             "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": spec, "status": {"capacity": res, "allocatable": res}}

    def node_status(self, ready: bool = True) -> dict[str, Any]:
        t = iso(now())
        uname = os.uname()

        def cond(ctype: str, status: str, reason: str, msg: str) -> dict[str, Any]:
            return {"type": ctype, "status": status, "reason": reason, "message": msg,
                    "lastHeartbeatTime": t, "lastTransitionTime": self._node_since(ctype, status)}

        a = self.args
        res = {"cpu": a.cpu, "memory": a.memory, "pods": str(a.pods), "ephemeral-storage": "100Gi"}
        return {
            "capacity": res, "allocatable": res,
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "node agent: not measured"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "node agent: not measured"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "node agent: not measured"),
                cond("Ready", "True" if ready else "False",
                     "KubeletReady" if ready else "KubeletNotReady",
                     "tfk8s node agent is running pods as local processes" if ready
                     else "tfk8s node agent stopped"),
            ],
            "addresses": [{"type": "InternalIP", "address": self.node_ip},
                          {"type": "Hostname", "address": self.node_name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": a.kubelet_port}},
            "nodeInfo": {"machineID": "tfk8s-nodeagent", "systemUUID": "tfk8s-nodeagent",
                         "bootID": str(os.getpid()), "kernelVersion": uname.release,
                         "osImage": "tfk8s node agent (local processes, images ignored)",
                         "containerRuntimeVersion": "tfk8s-local://0.1", "kubeletVersion": "v1.36.3-tfk8s",
                         "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
        }

    def _node_since(self, ctype: str, status: str) -> str:
        prev = self._since.get(ctype)
        if prev is None or prev[0] != status:
            self._since[ctype] = prev = (status, iso(now()))
        return prev[1]

    def register(self) -> None:
        from kubernetes.client.exceptions import ApiException

        body = self.node_body()
        try:
            self.core.create_node(body)
            log.info("registered node %s", self.node_name)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.core.patch_node(self.node_name, {"metadata": body["metadata"], "spec": body["spec"]},
                                 _content_type="application/merge-patch+json")
            log.info("node %s exists; updated labels, taints", self.node_name)
        self.push_node_status(True)
        self.renew_lease()

    def push_node_status(self, ready: bool) -> None:
        self.core.patch_node_status(self.node_name, {"status": self.node_status(ready)})

    def renew_lease(self) -> None:
        from kubernetes.client.exceptions import ApiException

        body = {"metadata": {"name": self.node_name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": self.node_name, "leaseDurationSeconds": 40,
                         "renewTime": micro(now())}}
        try:
            self.coord.patch_namespaced_lease(self.node_name, "kube-node-lease", body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            node = self.core.read_node(self.node_name)
            body["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node",
                                                    "name": self.node_name, "uid": node.metadata.uid}]
            self.coord.create_namespaced_lease("kube-node-lease", body)

    def heartbeat_loop(self) -> None:
        last_status = now()
        while not self.stopping.wait(10):
            try:
                self.renew_lease()
                if now() - last_status > 30:
                    self.push_node_status(True)
                    last_status = now()
            except Exception as exc:  # noqa: BLE001 - keep beating
                log.warning("heartbeat failed: %s", exc)

    def deregister(self) -> None:
        """The node NotReady and its Lease deleted (the agent stops)."""
        self.push_node_status(False)
        self.coord.delete_namespaced_lease(self.node_name, "kube-node-lease")
