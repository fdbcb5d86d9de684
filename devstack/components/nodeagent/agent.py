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

Usage (devstack/components/nodeagent/up runs it):
    agent.py run --kubeconfig K --state-dir D [--node-name tfk8s-local-0] ...
    agent.py cleanup --state-dir D      # remove sandboxes left by a dead agent (no API needed)
"""

from __future__ import annotations

import argparse
import base64
import faulthandler
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

import kubeletapi  # noqa: E402
import sandbox  # noqa: E402
from sandbox import MountPoints, Network, SandboxError  # noqa: E402

log = logging.getLogger("nodeagent")

TERMINAL = ("Succeeded", "Failed")
BACKOFF_START_S, BACKOFF_MAX_S, BACKOFF_RESET_S = 1.0, 10.0, 120.0
SHUTDOWN_GRACE_S = 3.0
PYTHON_RE = re.compile(r"^python(\d+(\.\d+)?)?$")
# Termination messages, as the kubelet bounds them: the last 4096 bytes of the file; with
# FallbackToLogsOnError and an empty file, the last 80 lines (at most 2048 bytes) of the log.
TERMINATION_MESSAGE_MAX = 4096
FALLBACK_LOG_LINES, FALLBACK_LOG_BYTES = 80, 2048
TERMINATION_LOG_ENV = "TFK8S_TERMINATION_LOG"
VAR_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def now() -> float:
    return time.time()


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command, args and env values."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)
    return VAR_RE.sub(sub, text)


class ConfigError(Exception):
    """The container cannot be started as specified (CreateContainerConfigError)."""


# --------------------------------------------------------------------------- containers
class Container:
    """One container of a pod: its process, restart count and the status the API gets."""

    def __init__(self, spec: dict[str, Any], init: bool, logs_dir: Path, restarts: int = 0):
        self.spec = spec
        self.name = spec["name"]
        self.init = init
        self.logs_dir = logs_dir / self.name
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.restart_count = restarts
        self.runs = 0  # processes started by this agent
        self.state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: dict[str, Any] = {}
        self.started_at: float | None = None
        self.exit_code: int | None = None  # of the last run
        self.backoff = BACKOFF_START_S
        self.next_start = 0.0
        self.done = False  # terminated and will not run again
        self.termination_file: Path | None = None  # of the current run (TFK8S_TERMINATION_LOG)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_path(self, previous: bool = False) -> Path:
        n = self.runs - 1 - (1 if previous else 0)
        return self.logs_dir / f"{max(n, 0)}.log"

    def status(self, ready: bool) -> dict[str, Any]:
        out = {"name": self.name, "image": self.spec.get("image", ""), "imageID": "",
               "ready": bool(ready and self.running), "restartCount": self.restart_count,
               "started": self.running, "state": self.state}
        if self.runs:
            out["containerID"] = f"tfk8s://{self.logs_dir.parent.name}-{self.name}-{self.runs - 1}"
        if self.last_state:
            out["lastState"] = self.last_state
        return out


# --------------------------------------------------------------------------------- pods
class PodWorker(threading.Thread):
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
                self.agent.delete_pod(self.namespace, self.pod_name, self.uid)
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

    # ------------------------------------------------------------------ volumes
    def _volumes(self) -> dict[str, tuple[str, bool]]:
        """Volume name -> (host source path, is a host path) materialized for this pod."""
        out: dict[str, tuple[str, bool]] = {}
        vdir = self.dir / "volumes"
        for vol in self.pod["spec"].get("volumes") or []:
            name = vol["name"]
            target = vdir / name
            if "hostPath" in vol:
                path = vol["hostPath"]["path"]
                kind = vol["hostPath"].get("type") or ""
                if kind == "Directory" and not os.path.isdir(path):
                    raise ConfigError(f'volume "{name}": hostPath {path} is not a directory (type Directory)')
                if kind == "DirectoryOrCreate":
                    os.makedirs(path, exist_ok=True)
                if kind == "File" and not os.path.isfile(path):
                    raise ConfigError(f'volume "{name}": hostPath {path} is not a file (type File)')
                out[name] = (path, True)
            elif "emptyDir" in vol:
                target.mkdir(parents=True)
                out[name] = (str(target), False)
            elif "configMap" in vol or "secret" in vol:
                target.mkdir(parents=True)
                self._write_keyed(target, vol.get("configMap"), vol.get("secret"))
                out[name] = (str(target), False)
            elif "downwardAPI" in vol:
                target.mkdir(parents=True)
                self._write_downward(target, vol["downwardAPI"].get("items") or [])
                out[name] = (str(target), False)
            elif "projected" in vol:
                target.mkdir(parents=True)
                for src in vol["projected"].get("sources") or []:
                    if "serviceAccountToken" in src:
                        t = src["serviceAccountToken"]
                        (target / t["path"]).write_text(self.agent.token_for(self.pod, t))
                    elif "configMap" in src or "secret" in src:
                        self._write_keyed(target, src.get("configMap"), src.get("secret"))
                    elif "downwardAPI" in src:
                        self._write_downward(target, src["downwardAPI"].get("items") or [])
                    else:
                        raise ConfigError(f'volume "{name}": projected source {sorted(src)} is not supported')
                out[name] = (str(target), False)
            else:
                kinds = sorted(k for k in vol if k != "name")
                raise ConfigError(f'volume "{name}": {", ".join(kinds)} volumes are not supported by the '
                                  "tfk8s node agent (hostPath, emptyDir, configMap, secret, projected, "
                                  "downwardAPI are)")
        return out

    def _write_keyed(self, target: Path, cm: dict | None, secret: dict | None) -> None:
        src = cm or secret or {}
        optional = bool(src.get("optional"))
        if cm:
            data = self.agent.read_configmap(self.namespace, cm["name"], optional)
        else:
            data = self.agent.read_secret(self.namespace, secret["secretName"], optional)
        items = src.get("items")
        pairs = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
        for key, rel in pairs:
            if key not in data:
                if optional:
                    continue
                raise ConfigError(f"key {key} not found in {'configmap' if cm else 'secret'}")
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data[key])

    def _write_downward(self, target: Path, items: list[dict]) -> None:
        for item in items:
            if "fieldRef" not in item:
                raise ConfigError(f"downwardAPI item {item.get('path')}: only fieldRef is supported")
            path = target / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self._field(item["fieldRef"]["fieldPath"]))

    def _field(self, field: str) -> str:
        md, spec = self.pod["metadata"], self.pod["spec"]
        simple = {"metadata.name": md["name"], "metadata.namespace": md["namespace"],
                  "metadata.uid": md["uid"], "spec.nodeName": spec.get("nodeName", ""),
                  "spec.serviceAccountName": spec.get("serviceAccountName", ""),
                  "status.podIP": self.ip or "", "status.podIPs": self.ip or "",
                  "status.hostIP": self.agent.node_ip, "status.hostIPs": self.agent.node_ip}
        if field in simple:
            return simple[field]
        for prefix, src in (("metadata.labels", md.get("labels") or {}),
                            ("metadata.annotations", md.get("annotations") or {})):
            if field == prefix:
                return "".join(f'{k}="{v}"\n' for k, v in sorted(src.items()))
            m = re.fullmatch(re.escape(prefix) + r"\['(.*)'\]", field)
            if m:
                return src.get(m.group(1), "")
        raise ConfigError(f"fieldRef {field} is not supported")

    # ------------------------------------------------------------------- running
    def _env(self, c: Container) -> dict[str, str]:
        env: dict[str, str] = {}
        for src in c.spec.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                ref = src["configMapRef"]
                data = self.agent.read_configmap(self.namespace, ref["name"], bool(ref.get("optional")))
            elif "secretRef" in src:
                ref = src["secretRef"]
                data = self.agent.read_secret(self.namespace, ref["name"], bool(ref.get("optional")))
            else:
                raise ConfigError(f"envFrom {sorted(src)} is not supported")
            env.update({prefix + k: v.decode() for k, v in data.items()})
        for e in c.spec.get("env") or []:
            if "valueFrom" not in e:
                env[e["name"]] = expand(e.get("value", ""), env)
                continue
            vf = e["valueFrom"]
            if "fieldRef" in vf:
                env[e["name"]] = self._field(vf["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in vf or "secretKeyRef" in vf:
                ref = vf.get("configMapKeyRef") or vf["secretKeyRef"]
                read = self.agent.read_configmap if "configMapKeyRef" in vf else self.agent.read_secret
                data = read(self.namespace, ref["name"], bool(ref.get("optional")))
                if ref["key"] in data:
                    env[e["name"]] = data[ref["key"]].decode()
                elif not ref.get("optional"):
                    raise ConfigError(f'env {e["name"]}: key {ref["key"]} not found in {ref["name"]}')
            else:
                raise ConfigError(f'env {e["name"]}: valueFrom {sorted(vf)} is not supported')
        return env

    def _argv(self, c: Container, env: dict[str, str]) -> list[str]:
        command = c.spec.get("command")
        if not command:
            raise ConfigError(f'container "{c.name}" has no command: the tfk8s node agent ignores the '
                              f"image ({c.spec.get('image')}) and so cannot use its entrypoint; set command")
        argv = [expand(a, env) for a in list(command) + list(c.spec.get("args") or [])]
        if PYTHON_RE.match(os.path.basename(argv[0])):
            argv[0] = self.agent.python
        return argv

    def _wrapper(self, c: Container, workdir: str) -> Path:
        """A shell script run inside the pod's namespaces: hostname, bind mounts, cwd, exec."""
        lines = ["#!/bin/sh", f"# tfk8s node agent: {self.key} container {c.name}", "set -e",
                 f"hostname {shlex.quote(self.hostname)}"]
        mounts = sorted(c.spec.get("volumeMounts") or [], key=lambda m: m["mountPath"].count("/"))
        for m in mounts:
            if m["name"] not in self.volumes:
                raise ConfigError(f'volumeMount {m["name"]}: no such volume')
            src, _ = self.volumes[m["name"]]
            if m.get("subPath"):
                src = os.path.join(src, expand(m["subPath"], {}))
                if not os.path.exists(src):
                    os.makedirs(src)
            dst = m["mountPath"]
            if os.path.exists(dst) and os.path.realpath(src) == os.path.realpath(dst):
                continue  # hostPath mounted at its own path: nothing to do
            self.agent.mountpoints.ensure(dst, self.uid, is_file=os.path.isfile(src))
            lines.append(f"mount --bind {shlex.quote(src)} {shlex.quote(dst)}")
            if m.get("readOnly"):
                lines.append(f"mount -o remount,bind,ro {shlex.quote(dst)}")
        lines += self._termination_mount(c, [m["mountPath"] for m in mounts])
        lines += [f"cd {shlex.quote(workdir)}", 'exec "$@"', ""]
        path = self.dir / f"run-{c.name}.sh"
        path.write_text("\n".join(lines))
        return path

    def _termination_mount(self, c: Container, mount_paths: list[str]) -> list[str]:
        """Wrapper lines that bind-mount the run's termination file at terminationMessagePath
        (the API's default: /dev/termination-log) inside the container's mount namespace, so a
        program written for Kubernetes writes its message where the agent reads it. Not done
        for a path inside one of the container's volumes (the file would land in the volume)."""
        path = c.spec.get("terminationMessagePath") or ""
        if not path.startswith("/") or c.termination_file is None:
            return []
        path = os.path.normpath(path)
        if any(path == mp or path.startswith(mp.rstrip("/") + "/") for mp in mount_paths):
            return []
        self.agent.mountpoints.ensure(path, self.uid, is_file=True)
        return [f"mount --bind {shlex.quote(str(c.termination_file))} {shlex.quote(path)}"]

    def _termination_message(self, c: Container, code: int) -> str | None:
        """What the kubelet puts into state.terminated.message: the run's termination file
        (its last 4096 bytes), else with FallbackToLogsOnError and a failed run the log's tail."""
        data = b""
        if c.termination_file is not None:
            try:
                with open(c.termination_file, "rb") as fh:
                    size = fh.seek(0, os.SEEK_END)
                    fh.seek(max(0, size - TERMINATION_MESSAGE_MAX))
                    data = fh.read()
            except OSError:
                pass
        if not data and code != 0 and c.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            try:
                lines = c.log_path().read_bytes().splitlines(keepends=True)
                data = b"".join(lines[-FALLBACK_LOG_LINES:])[-FALLBACK_LOG_BYTES:]
            except OSError:
                pass
        return data.decode("utf-8", "replace") if data else None

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
        message = self._termination_message(c, code)
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

    # -------------------------------------------------------------------- status
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
        if self.agent.patch_status(self.namespace, self.pod_name, st):
            self.last_pushed = text


# -------------------------------------------------------------------------------- agent
class Agent:
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
        self.services: dict[tuple[str, str], dict[str, Any]] = {}
        self._hosts_lock = threading.Lock()

    # ------------------------------------------------------------------- node
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

    _since: dict[str, tuple[str, str]] = {}

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

    # -------------------------------------------------------------------- API
    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.patch_namespaced_pod_status(name, namespace, {"status": status},
                                                  _content_type="application/merge-patch+json")
            return True
        except ApiException as exc:
            if exc.status == 404:
                return True  # gone: nothing to report to
            log.warning("status of %s/%s: HTTP %s %s", namespace, name, exc.status, exc.reason)
        except Exception as exc:  # noqa: BLE001
            log.warning("status of %s/%s: %s", namespace, name, exc)
        return False

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0,
                                            body=client.V1DeleteOptions(grace_period_seconds=0,
                                                                        preconditions={"uid": uid}))
            log.info("%s/%s: deleted", namespace, name)
        except ApiException as exc:
            if exc.status not in (404, 409):
                log.warning("deleting %s/%s: HTTP %s %s", namespace, name, exc.status, exc.reason)

    def read_configmap(self, namespace: str, name: str, optional: bool) -> dict[str, bytes]:
        from kubernetes.client.exceptions import ApiException

        try:
            cm = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as exc:
            if exc.status == 404 and optional:
                return {}
            raise ConfigError(f'configmap "{name}" not found' if exc.status == 404
                              else f"reading configmap {name}: HTTP {exc.status}") from exc
        out = {k: v.encode() for k, v in (cm.data or {}).items()}
        out.update({k: base64.b64decode(v) for k, v in (cm.binary_data or {}).items()})
        return out

    def read_secret(self, namespace: str, name: str, optional: bool) -> dict[str, bytes]:
        from kubernetes.client.exceptions import ApiException

        try:
            s = self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404 and optional:
                return {}
            raise ConfigError(f'secret "{name}" not found' if exc.status == 404
                              else f"reading secret {name}: HTTP {exc.status}") from exc
        return {k: base64.b64decode(v) for k, v in (s.data or {}).items()}

    def token_for(self, pod: dict[str, Any], src: dict[str, Any]) -> str:
        sa = pod["spec"].get("serviceAccountName") or "default"
        body = {"spec": {"expirationSeconds": int(src.get("expirationSeconds") or 3600),
                         "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                            "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}}}
        if src.get("audience"):
            body["spec"]["audiences"] = [src["audience"]]
        try:
            return self.core.create_namespaced_service_account_token(
                sa, pod["metadata"]["namespace"], body).status.token
        except Exception as exc:  # noqa: BLE001 - a TF program does not need it
            log.warning("token for %s/%s: %s", pod["metadata"]["namespace"], sa, exc)
            return ""

    def list_raw(self, fn, **kwargs) -> list[dict[str, Any]]:
        resp = fn(_preload_content=False, _request_timeout=30, **kwargs)
        return json.loads(resp.data).get("items") or []

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
        pods = self.list_raw(self.core.list_pod_for_all_namespaces,
                             field_selector=f"spec.nodeName={self.node_name}")
        self.services = {(s["metadata"]["namespace"], s["metadata"]["name"]): s
                         for s in self.list_raw(self.core.list_service_for_all_namespaces)}
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
        own = [f"{me.hostname}.{me.subdomain}.{me.namespace}.svc.cluster.local",
               f"{me.hostname}.{me.subdomain}.{me.namespace}.svc", f"{me.hostname}.{me.subdomain}"] \
            if me.subdomain else []
        lines = ["# tfk8s node agent: hosts of pod " + me.key,
                 "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback",
                 f"{me.ip}\t" + " ".join(own + [me.hostname])]
        if self.host_name and self.host_name != me.hostname:
            lines.append(f"{self.host_addr}\t{self.host_name}")
        if me.subdomain:
            svc = self.services.get((me.namespace, me.subdomain))
            if svc is not None:
                not_ready_ok = bool(svc.get("spec", {}).get("publishNotReadyAddresses"))
                peers = sorted((w for w in list(self.workers.values())
                                if w is not me and w.sandbox_ready and w.ip and w.namespace == me.namespace
                                and w.subdomain == me.subdomain and (not_ready_ok or w.ready())),
                               key=lambda w: w.hostname)
                for w in peers:
                    base = f"{w.hostname}.{w.subdomain}.{w.namespace}.svc"
                    lines.append(f"{w.ip}\t{base}.cluster.local {base} {w.hostname}.{w.subdomain}")
        return "\n".join(lines) + "\n"

    def update_hosts(self) -> None:
        with self._hosts_lock:
            for w in list(self.workers.values()):
                if not w.sandbox_ready:
                    continue
                text = self.hosts_for(w)
                if text != w.hosts_text:
                    if sandbox.write_in_place(sandbox.NETNS_ETC / w.netns / "hosts", text):
                        log.info("%s: hosts file now has %d peers", w.key,
                                 max(text.count(".svc.cluster.local") - 1, 0))
                    w.hosts_text = text

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
        self.register()
        for target in (self.heartbeat_loop, self.watch_loop):
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
            self.push_node_status(False)
            self.coord.delete_namespaced_lease(self.node_name, "kube-node-lease")
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
