"""One pod bound to this node, from its sandbox to its deletion, on a thread of its own.

The worker creates the pod's sandbox (address, network namespace, hosts file, volumes),
runs the init containers one at a time and then the containers as local processes (each
the leader of its own process group, in the pod's namespaces), restarts them as the
restart policy says, enforces ``activeDeadlineSeconds``, stops them on deletion (SIGTERM,
SIGKILL after the grace period) and removes the sandbox. What the spec asks of a container
is made concrete by :mod:`podconfig`; what the API server sees is built by :mod:`podstatus`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any

import sandbox
from containers import BACKOFF_MAX_S, BACKOFF_RESET_S, BACKOFF_START_S, Container
from podconfig import ConfigError, PodConfig
from podstatus import PodStatus
from sandbox import SandboxError
from timestamps import iso, now, parse_ts

if TYPE_CHECKING:
    from agent import Agent

log = logging.getLogger("nodeagent")

TERMINAL = ("Succeeded", "Failed")
SHUTDOWN_GRACE_S = 3.0
TERMINATION_LOG_ENV = "TFK8S_TERMINATION_LOG"


class PodWorker(PodConfig, PodStatus, threading.Thread):
    """Owns one pod bound to this node: sandbox, processes, status, deletion."""

    def __init__(self, agent: Agent, pod: dict[str, Any]):
        md = pod["metadata"]
        super().__init__(name=f"pod-{md['namespace']}/{md['name']}", daemon=True)
        self.agent = agent
        self.pod = pod
        self.uid: str = md["uid"]
        self.namespace: str = md["namespace"]
        self.pod_name: str = md["name"]
        self.key = f"{self.namespace}/{self.pod_name}"
        spec = pod["spec"]
        self.hostname = spec.get("hostname") or self.pod_name[:63]
        self.subdomain = spec.get("subdomain") or ""
        self.restart_policy = spec.get("restartPolicy") or "Always"
        self.netns = f"{sandbox.NETNS_PREFIX}{self.uid[:8]}"
        self.veth = f"{sandbox.VETH_PREFIX}{self.uid[:8]}"
        self.dir = agent.state_dir / "pods" / self.namespace / self.pod_name
        self.logs_dir = agent.state_dir / "logs" / f"{self.namespace}_{self.pod_name}_{self.uid}"
        self.ip: str | None = None
        self.sandbox_ready = False
        self.hosts_text = ""
        self.phase = (pod.get("status") or {}).get("phase") or "Pending"
        self.reason: str | None = None
        self.message: str | None = None
        self.start_time = parse_ts((pod.get("status") or {}).get("startTime")) or now()
        self.finished = self.phase in TERMINAL
        self.config_error: tuple[str, str] | None = None
        self.stop_reason: str | None = None  # "gone" (pod vanished) or "shutdown" (agent stops)
        self.done = threading.Event()
        self.transitions: dict[str, tuple[str, float]] = {}
        self.last_pushed: str | None = None
        self.lock = threading.Lock()
        old = {c["name"]: c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or []}
        self.init_containers = [Container(c, True, self.logs_dir) for c in spec.get("initContainers") or []]
        self.containers = [Container(c, False, self.logs_dir, old.get(c["name"], 0))
                           for c in spec["containers"]]

    # ----------------------------------------------------------------- lifecycle
    def update(self, pod: dict[str, Any]) -> None:
        with self.lock:
            self.pod = pod

    def stop(self, reason: str) -> None:
        self.stop_reason = reason

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # noqa: BLE001 - one pod must never take the agent down
            log.exception("%s: worker crashed", self.key)
            self._kill_all(0)
        finally:
            self._cleanup()
            self.done.set()

    def _run(self) -> None:
        if not self.finished:
            try:
                self._setup()
            except (SandboxError, ConfigError, OSError) as exc:
                log.warning("%s: sandbox: %s", self.key, exc)
                self.config_error = ("CreateContainerConfigError", str(exc))
        while True:
            with self.lock:
                pod = self.pod
            if self.stop_reason == "gone":
                self._kill_all(0)
                return
            if self.stop_reason == "shutdown":
                self._kill_all(SHUTDOWN_GRACE_S)
                if not self.finished:
                    self.phase, self.finished = "Failed", True
                    self.reason = "Terminated"
                    self.message = f"Pod was terminated: the node agent on {self.agent.node_name} stopped"
                self._push(force=True)
                return
            if pod["metadata"].get("deletionTimestamp"):
                grace = pod["metadata"].get("deletionGracePeriodSeconds")
                if grace is None:
                    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
                self._kill_all(float(grace))
                self._push()
                self.agent.api.delete_pod(self.namespace, self.pod_name, self.uid)
                return
            if not self.finished and self.config_error is None:
                self._step()
            self._push()
            time.sleep(0.2)

    def _setup(self) -> None:
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
        (self.dir / "work").mkdir(parents=True)
        self.ip = self.agent.network.allocate()
        self.hosts_text = self.agent.hosts_for(self)
        self.agent.network.create(self.netns, self.veth, self.ip, self.hosts_text)
        self.sandbox_ready = True
        self.volumes = self._volumes()
        self.agent.wake.set()  # peers' hosts files now get this pod
        log.info("%s: sandbox %s ip %s", self.key, self.netns, self.ip)

    def _cleanup(self) -> None:
        try:
            sandbox.Network.delete(self.netns, self.veth)
        except Exception:  # noqa: BLE001
            log.exception("%s: deleting sandbox", self.key)
        self.agent.network.release(self.ip)
        self.agent.mountpoints.release(self.uid)
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.dir.parent.rmdir()
        self.sandbox_ready = False
        self.agent.wake.set()
        log.info("%s: stopped; sandbox %s removed", self.key, self.netns)

    # --------------------------------------------------------------- processes
    def _start(self, c: Container) -> None:
        env = self._env(c)
        argv = self._argv(c, env)
        workdir = c.spec.get("workingDir") or str(self.dir / "work")
        # A fresh termination file per run, as the kubelet gives each container instance its own.
        c.termination_file = self.dir / "termination" / c.name
        c.termination_file.parent.mkdir(parents=True, exist_ok=True)
        c.termination_file.write_bytes(b"")
        wrapper = self._wrapper(c, workdir)
        base = {"PATH": f"{os.path.dirname(self.agent.python)}:/usr/local/sbin:/usr/local/bin:"
                        "/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": str(self.dir / "work"), "HOSTNAME": self.hostname}
        # The agent owns where the message goes, as the kubelet owns terminationMessagePath's file.
        full_env = {**base, **env, TERMINATION_LOG_ENV: str(c.termination_file)}
        c.runs += 1
        logf = open(c.log_path(), "wb")  # noqa: SIM115 - handed to the child
        try:
            c.proc = subprocess.Popen(
                ["ip", "netns", "exec", self.netns, "unshare", "--uts", "--", "/bin/sh", str(wrapper), *argv],
                env=full_env, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                cwd=str(self.dir), start_new_session=True)
        finally:
            logf.close()
        (self.dir / f"{c.name}.pid").write_text(str(c.proc.pid))
        c.started_at = now()
        c.state = {"running": {"startedAt": iso(c.started_at)}}
        log.info("%s: started %s (pid %d, run %d): %s", self.key, c.name, c.proc.pid, c.runs,
                 shlex.join(argv)[:300])

    def _exited(self, c: Container) -> None:
        code = c.proc.returncode
        if code < 0:
            code = 128 - code  # killed by a signal, as a container runtime reports it
        finished = now()
        term: dict[str, Any] = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                "startedAt": iso(c.started_at), "finishedAt": iso(finished),
                                "containerID": f"tfk8s://{self.logs_dir.name}-{c.name}-{c.runs - 1}"}
        message = c.termination_message(code)
        if message:
            term["message"] = message
        if code == 0 and c.started_at and finished - c.started_at > BACKOFF_RESET_S:
            c.backoff = BACKOFF_START_S
        c.exit_code = code
        c.proc = None
        with contextlib.suppress(FileNotFoundError):
            (self.dir / f"{c.name}.pid").unlink()
        policy = "OnFailure" if c.init and self.restart_policy == "Always" else self.restart_policy
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        log.info("%s: %s exited %d%s", self.key, c.name, code, " (restarting)" if restart else "")
        if restart:
            c.last_state = {"terminated": term}
            c.restart_count += 1
            c.next_start = now() + c.backoff
            c.backoff = min(c.backoff * 2, BACKOFF_MAX_S)
            c.state = {"waiting": {"reason": "CrashLoopBackOff",
                                   "message": f"back-off {c.next_start - now():.0f}s restarting failed "
                                              f"container={c.name} pod={self.pod_name}"}}
        else:
            c.state = {"terminated": term}
            c.done = True

    def _try_start(self, c: Container) -> None:
        if now() < c.next_start:
            return
        try:
            self._start(c)
        except ConfigError as exc:
            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
            self.config_error = ("CreateContainerConfigError", str(exc))
        except (OSError, SandboxError) as exc:
            c.state = {"waiting": {"reason": "RunContainerError", "message": str(exc)}}
            self.config_error = ("RunContainerError", str(exc))

    def _step(self) -> None:
        spec = self.pod["spec"]
        deadline = spec.get("activeDeadlineSeconds")
        if deadline and now() - self.start_time > float(deadline):
            self._kill_all(float(spec.get("terminationGracePeriodSeconds", 30)))
            self.phase, self.finished = "Failed", True
            self.reason = "DeadlineExceeded"
            self.message = "Pod was active on the node longer than the specified deadline"
            return
        for c in self.init_containers:
            if c.done and c.exit_code == 0:
                continue
            if c.proc is not None:
                if c.running:
                    return
                self._exited(c)
                if c.done and c.exit_code != 0:  # restartPolicy Never
                    self.phase, self.finished = "Failed", True
                    for m in self.containers:
                        m.state = {"waiting": {"reason": "PodInitializing"}}
                    return
                if not c.done:
                    return
                continue
            self._try_start(c)
            return
        for c in self.containers:
            if c.proc is not None and not c.running:
                self._exited(c)
            if c.proc is None and not c.done and self.config_error is None:
                self._try_start(c)
        if all(c.done for c in self.containers):
            self.finished = True
            self.phase = "Succeeded" if all(c.exit_code == 0 for c in self.containers) else "Failed"
        elif any(c.runs for c in self.containers):
            self.phase = "Running"

    def _kill_all(self, grace: float) -> None:
        """SIGTERM every running container's process group, SIGKILL after ``grace``."""
        live = [c for c in self.init_containers + self.containers if c.running]
        for c in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(c.running for c in live) and time.monotonic() < deadline:
            time.sleep(0.1)
        for c in live:
            if c.running:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)
        for c in live:
            try:
                c.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.warning("%s: %s (pid %d) did not die", self.key, c.name, c.proc.pid)
        if self.sandbox_ready:
            sandbox.kill_netns_processes(self.netns)  # anything a container left behind
        for c in live:
            if c.proc is not None and c.proc.poll() is not None:
                saved = self.restart_policy
                self.restart_policy = "Never"  # a killed container does not restart
                self._exited(c)
                self.restart_policy = saved
