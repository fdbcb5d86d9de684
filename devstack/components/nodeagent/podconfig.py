"""What a pod's spec asks of its containers, made concrete on this machine.

Why a module of its own: turning the spec into something to run (the volumes materialised
in the pod's directory, each container's env with its ``valueFrom`` and ``envFrom`` sources,
the command with Kubernetes' ``$(VAR)`` expansion, and the wrapper script that bind-mounts
the volumes and the termination file inside the container's mount namespace) is the
kubelet's configuration step, apart from running and watching the processes. Anything
asked for that the agent cannot provide is a :class:`ConfigError`, reported as the
container's ``CreateContainerConfigError``.

:class:`PodConfig` is a mixin of :class:`podworker.PodWorker`: it reads the pod and the
sandbox state the worker owns (names below) and asks the agent for ConfigMaps, Secrets,
tokens and mount points.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent import Agent
    from containers import Container

PYTHON_RE = re.compile(r"^python(\d+(\.\d+)?)?$")
VAR_RE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


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


class PodConfig:
    """The configuration step of a pod worker: volumes, env, argv and the wrapper script."""

    # Set by the pod worker.
    agent: Agent
    pod: dict[str, Any]
    namespace: str
    uid: str
    key: str
    hostname: str
    dir: Path
    ip: str | None
    volumes: dict[str, tuple[str, bool]]

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
                        (target / t["path"]).write_text(self.agent.api.token_for(self.pod, t))
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
            data = self.agent.api.read_configmap(self.namespace, cm["name"], optional)
        else:
            data = self.agent.api.read_secret(self.namespace, secret["secretName"], optional)
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

    # ------------------------------------------------------------- env, argv, mounts
    def _env(self, c: Container) -> dict[str, str]:
        env: dict[str, str] = {}
        for src in c.spec.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                ref = src["configMapRef"]
                data = self.agent.api.read_configmap(self.namespace, ref["name"], bool(ref.get("optional")))
            elif "secretRef" in src:
                ref = src["secretRef"]
                data = self.agent.api.read_secret(self.namespace, ref["name"], bool(ref.get("optional")))
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
                read = self.agent.api.read_configmap if "configMapKeyRef" in vf else self.agent.api.read_secret
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
