"""tfk8s node agent: a kubelet-like node that runs pods as local processes (devstack only).

Why: the devstack has no container runtime, and KWOK only simulates pods. This agent
registers its own Node, takes the pods the scheduler binds to it and runs each container's
command and args, with its env (TF_CONFIG unchanged), as a local process in a per-pod
network namespace whose hosts file resolves the pod's Service peers
(``<hostname>.<subdomain>.<namespace>.svc``). It reports status through the API as a
kubelet would (phases, restart counts, real exit codes), honours restart policies, deletion
with grace periods and activeDeadlineSeconds, and serves container logs to the API server.

It ignores the image: every container runs on this machine, ``python``/``python3`` in the
command mapped to a configured interpreter. See README.md next to this file.

This file is the entry point (the CLI below) and the reconcile loop that gives each pod
bound to the node a worker; the rest lives beside it, one module per concern:
``podworker`` (a pod's sandbox, processes, restarts and deletion), ``containers`` (one
container's runs), ``podconfig`` (volumes, env, argv, the wrapper script), ``podstatus``
(the pod status pushed to the API), ``podapi`` (the requests made for pods),
``nodestatus`` (the Node, its status and Lease), ``hosts`` (each pod's hosts file),
``sandbox`` (network namespaces, the bridge, mount points), ``kubeletapi`` (the HTTPS
server the API server reads container logs from) and ``timestamps``.

Usage (devstack/components/nodeagent/up runs it):
    agent.py run --kubeconfig K --state-dir D [--node-name tfk8s-local-0] ...
    agent.py cleanup --state-dir D      # remove sandboxes left by a dead agent (no API needed)
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import logging
import os
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules, when run as a script

import hosts  # noqa: E402
import kubeletapi  # noqa: E402
import sandbox  # noqa: E402
from nodestatus import NodeReporter  # noqa: E402
from podapi import PodApi  # noqa: E402
from podworker import SHUTDOWN_GRACE_S, PodWorker  # noqa: E402
from sandbox import MountPoints, Network  # noqa: E402

log = logging.getLogger("nodeagent")


class Agent:
    """The node: its pods' workers, the hosts files between them, and the log lookup."""

    def __init__(self, args: argparse.Namespace):
        from kubernetes import client, config

        self.args = args
        self.node_name: str = args.node_name
        self.node_ip = "127.0.0.1"
        self.state_dir = Path(args.state_dir)
        self.python = args.python
        self.api_client = config.new_client_from_config(config_file=args.kubeconfig)
        self.core = client.CoreV1Api(self.api_client)
        self.coord = client.CoordinationV1Api(self.api_client)
        self.api = PodApi(self.core)
        self.network = Network(args.subnet, args.bridge)
        # Pods reach the host at the bridge's address; its host name resolves to it in every pod
        # (HDFS redirects name the DataNode by this machine's host name).
        self.host_addr = self.network.gateway
        self.host_name = args.host_name if args.host_name not in ("", "localhost") else ""
        self.mountpoints = MountPoints(self.state_dir / "mountpoints")
        self.workers: dict[str, PodWorker] = {}
        self.finished_uids: set[str] = set()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.node = NodeReporter(args, self.core, self.coord, self.node_ip, self.stopping)
        self.services: dict[tuple[str, str], dict[str, Any]] = {}
        self._hosts_lock = threading.Lock()

    # ------------------------------------------------------------------ watch
    def watch_loop(self) -> None:
        """Wakes the reconcile loop on every pod event of this node (the loop LISTs)."""
        from kubernetes import watch

        while not self.stopping.is_set():
            try:
                w = watch.Watch()
                for _ in w.stream(self.core.list_pod_for_all_namespaces,
                                  field_selector=f"spec.nodeName={self.node_name}",
                                  timeout_seconds=30, _request_timeout=40):
                    self.wake.set()
                    if self.stopping.is_set():
                        break
            except Exception as exc:  # noqa: BLE001
                log.debug("watch ended: %s", exc)
                self.stopping.wait(1)

    # -------------------------------------------------------------- reconcile
    def reconcile(self) -> None:
        pods = self.api.list_raw(self.core.list_pod_for_all_namespaces,
                                 field_selector=f"spec.nodeName={self.node_name}")
        self.services = {(s["metadata"]["namespace"], s["metadata"]["name"]): s
                         for s in self.api.list_raw(self.core.list_service_for_all_namespaces)}
        seen = set()
        for pod in pods:
            uid = pod["metadata"]["uid"]
            seen.add(uid)
            w = self.workers.get(uid)
            if w is not None:
                w.update(pod)
            elif uid not in self.finished_uids:
                w = PodWorker(self, pod)
                self.workers[uid] = w
                log.info("%s: bound to this node (phase %s)", w.key, w.phase)
                w.start()
        for uid, w in list(self.workers.items()):
            if uid not in seen:
                w.stop("gone")  # deleted without us (force delete, namespace gone)
            if w.done.is_set():
                del self.workers[uid]
                self.finished_uids.add(uid)
        self.finished_uids &= seen | set(self.workers)
        self.update_hosts()

    def hosts_for(self, me: PodWorker) -> str:
        return hosts.hosts_file(me, list(self.workers.values()), self.services, self.host_name, self.host_addr)

    def update_hosts(self) -> None:
        with self._hosts_lock:
            hosts.rewrite_hosts_files(list(self.workers.values()), self.hosts_for)

    # -------------------------------------------------------------------- logs
    def find_log(self, namespace: str, pod: str, container: str, previous: bool):
        for w in list(self.workers.values()):
            if w.namespace == namespace and w.pod_name == pod:
                for c in w.init_containers + w.containers:
                    if c.name == container:
                        if previous and c.runs < 2:
                            return f'previous terminated container "{container}" in pod "{pod}" not found'
                        if not c.runs:
                            return f'container "{container}" in pod "{pod}" is waiting to start'
                        return str(c.log_path(previous)), (lambda c=c, n=c.runs: c.running and c.runs == n)
                return f'container "{container}" is not valid for pod "{pod}"'
        return f'pod "{pod}" in namespace "{namespace}" is not on node {self.node_name}'

    # --------------------------------------------------------------------- main
    def run(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        removed = sandbox.cleanup_all(self.state_dir, self.args.bridge)
        if removed:
            log.info("removed leftovers of a previous agent: %s", ", ".join(removed))
        shutil.rmtree(self.state_dir / "pods", ignore_errors=True)
        self.network.ensure_bridge()
        a = self.args
        kubeletapi.serve("127.0.0.1", a.kubelet_port, a.tls_cert, a.tls_key, a.client_ca, self.find_log)
        self.node.register()
        for target in (self.node.heartbeat_loop, self.watch_loop):
            threading.Thread(target=target, name=target.__name__, daemon=True).start()
        (self.state_dir / "ready").write_text(f"{os.getpid()}\n")
        log.info("node %s ready (bridge %s, %s, host %s = %s, python %s)", self.node_name, a.bridge, a.subnet,
                 self.host_name or "-", self.host_addr, self.python)
        while not self.stopping.is_set():
            try:
                self.reconcile()
            except Exception as exc:  # noqa: BLE001 - API hiccups: retry on the next round
                log.warning("reconcile: %s", exc)
            self.wake.wait(1.0)
            self.wake.clear()
        self.shutdown()

    def shutdown(self) -> None:
        log.info("stopping: %d pods", len(self.workers))
        with contextlib.suppress(FileNotFoundError):
            (self.state_dir / "ready").unlink()
        for w in self.workers.values():
            w.stop("shutdown")
        for w in self.workers.values():
            w.join(SHUTDOWN_GRACE_S + 20)
        try:
            self.node.deregister()
        except Exception as exc:  # noqa: BLE001
            log.warning("marking node NotReady: %s", exc)
        removed = sandbox.cleanup_all(self.state_dir, self.args.bridge)
        log.info("stopped; removed %s", ", ".join(removed) or "nothing")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    c = sub.add_parser("cleanup")
    for sp in (r, c):
        sp.add_argument("--state-dir", required=True)
        sp.add_argument("--bridge", default="tfk8s-br0")
    r.add_argument("--kubeconfig", required=True)
    r.add_argument("--node-name", default="tfk8s-local-0")
    r.add_argument("--python", default="/work/main/.venv/bin/python")
    r.add_argument("--subnet", default="10.213.0.0/24")
    r.add_argument("--kubelet-port", type=int, default=16260)
    r.add_argument("--tls-cert", required=True)
    r.add_argument("--tls-key", required=True)
    r.add_argument("--client-ca", required=True)
    r.add_argument("--cpu", default="8")
    r.add_argument("--memory", default="16Gi")
    r.add_argument("--pods", type=int, default=110)
    r.add_argument("--no-taint", dest="taint", action="store_false")
    r.add_argument("--host-name", default=socket.gethostname(),
                   help="this machine's host name, resolved to the host address in every pod")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # retries while the API server restarts
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: every thread's stack into the log
    if os.geteuid() != 0:
        log.error("the node agent needs root (network namespaces, bridge, bind mounts)")
        return 1
    if args.cmd == "cleanup":
        removed = sandbox.cleanup_all(Path(args.state_dir), args.bridge)
        shutil.rmtree(Path(args.state_dir) / "pods", ignore_errors=True)
        print("removed: " + (", ".join(removed) or "nothing"))
        return 0
    agent = Agent(args)

    def on_signal(signum, _frame):
        log.info("signal %d: shutting down", signum)
        agent.stopping.set()
        agent.wake.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
