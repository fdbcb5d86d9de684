"""The TF job spec: a frozen, typed description of one distributed TensorFlow job.

Why frozen and separate from Airflow: the same spec arrives from Python, a YAML
file, a UI parameter form or ``dag_run.conf``; it is validated once, before any
object exists in a cluster, and then only read. Parsing collects every problem
(see :mod:`tfk8s_airflow.job.fields`) instead of stopping at the first, so a user
fixes a spec in one round trip. ``to_dict`` round-trips through ``from_dict`` so a
spec can travel through XCom.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from tfk8s_airflow.contract import DEFAULT_CODE_DIR, DEFAULT_PORT, ENV_PREFIX, RESERVED_ENV
from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job import fields as v
from tfk8s_airflow.pathrules import is_safe_relative

#: Role names in TF_CONFIG order (TFJob sorts cluster keys the same way).
ROLES = ("chief", "evaluator", "ps", "worker")
DEFAULT_MAX_REPLICAS = 512
WIRINGS = ("tf_config", "flags", "both")
SUCCESS_POLICIES = ("default", "all_workers")
RESTART_POLICIES = ("Never", "OnFailure", "ExitCode")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")

_TOP_KEYS = {
    "name", "namespace", "image", "image_pull_policy", "command", "args", "env",
    "resources", "node_selector", "tolerations", "port", "tf_wiring",
    "success_policy", "restart_policy", "max_restarts", "schedule_timeout",
    "startup_timeout", "active_deadline", "labels", "annotations",
    "service_account", "volumes", "hide_evaluator", "code", *ROLES,
}
_ROLE_KEYS = {
    "replicas", "image", "command", "args", "env", "resources", "node_selector",
    "tolerations", "restart_policy", "tracked", "annotations",
}
_VOLUME_KEYS = {"name", "mount_path", "host_path", "pvc", "read_only", "sub_path"}
_CODE_KEYS = {"uri", "entrypoint", "sha256", "image", "mount_path"}


def _frozen_map(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(data or {}))


@dataclass(frozen=True)
class Volume:
    """A named mount (data, logs, model...) backed by a hostPath or a PVC.

    GlusterFS reaches pods through these: the in-tree ``glusterfs`` volume was
    removed in Kubernetes 1.26, so a node-mounted volume (hostPath) or a PVC of a
    CSI driver stands in for it.
    """

    name: str
    mount_path: str
    host_path: str | None = None
    pvc: str | None = None
    read_only: bool = False
    sub_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "mount_path": self.mount_path}
        for key in ("host_path", "pvc", "sub_path"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.read_only:
            out["read_only"] = True
        return out


@dataclass(frozen=True)
class CodeSource:
    """Training code fetched into every replica by an init container (seed/TonY style)."""

    uri: str
    entrypoint: str = "run.sh"
    sha256: str | None = None
    image: str | None = None  # image of the fetch init container; defaults to the job's
    mount_path: str = DEFAULT_CODE_DIR

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "entrypoint": self.entrypoint,
                               "mount_path": self.mount_path}
        if self.sha256:
            out["sha256"] = self.sha256
        if self.image:
            out["image"] = self.image
        return out


@dataclass(frozen=True)
class RoleSpec:
    """One role's replicas and its overrides of the job-wide settings (already merged)."""

    role: str
    replicas: int
    image: str
    command: tuple[str, ...] | None
    args: tuple[str, ...]
    env: Mapping[str, str]
    resources: Mapping[str, str]
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    restart_policy: str
    tracked: bool
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def pod_restart_policy(self) -> str:
        """ExitCode is judged by the sensor; in place restarts need OnFailure."""
        return "OnFailure" if self.restart_policy == "ExitCode" else self.restart_policy


@dataclass(frozen=True)
class TFJobSpec:
    """A validated distributed TensorFlow job. Build with :meth:`from_dict`."""

    name: str
    namespace: str
    image: str
    image_pull_policy: str
    command: tuple[str, ...] | None
    args: tuple[str, ...]
    env: Mapping[str, str]
    resources: Mapping[str, str]
    port: int
    tf_wiring: str
    success_policy: str
    restart_policy: str
    max_restarts: int
    schedule_timeout: int
    startup_timeout: int
    active_deadline: int | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    service_account: str | None
    volumes: tuple[Volume, ...]
    hide_evaluator: bool
    roles: Mapping[str, RoleSpec]
    code: CodeSource | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ----------------------------------------------------------------- loading
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, max_replicas: int = DEFAULT_MAX_REPLICAS,
                  overrides: Iterable[str] = ()) -> TFJobSpec:
        """Validate and freeze. Raises :class:`SpecError` listing every problem."""
        if not isinstance(data, Mapping):
            raise SpecError(Problem("spec", f"must be a mapping, got {type(data).__name__}",
                                    "write the spec as a YAML/JSON object with name, image, worker..."))
        data = apply_overrides(data, overrides)
        return _Parser(data, max_replicas).parse()

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> TFJobSpec:
        return cls.from_dict(load_spec_file(path), **kwargs)

    # ------------------------------------------------------------------ access
    def replicas(self, role: str) -> int:
        r = self.roles.get(role)
        return r.replicas if r else 0

    @property
    def active_roles(self) -> tuple[RoleSpec, ...]:
        """Roles with at least one replica, in TF_CONFIG order."""
        return tuple(self.roles[r] for r in ROLES if r in self.roles and self.roles[r].replicas > 0)

    @property
    def total_replicas(self) -> int:
        return sum(r.replicas for r in self.roles.values())

    def replica_ids(self) -> list[tuple[str, int]]:
        return [(r.role, i) for r in self.active_roles for i in range(r.replicas)]

    def success_replicas(self) -> list[tuple[str, int]]:
        """Replicas whose success makes the job succeed (with tracked evaluators)."""
        if self.success_policy == "all_workers":
            ids = [("worker", i) for i in range(self.replicas("worker"))
                   if self.roles["worker"].tracked]
            if self.replicas("chief"):
                ids.insert(0, ("chief", 0))
        else:
            ids = [("chief", 0)] if self.replicas("chief") else [("worker", 0)]
        if self.replicas("evaluator") and self.roles["evaluator"].tracked:
            ids.append(("evaluator", 0))
        return ids

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data; ``TFJobSpec.from_dict(s.to_dict()) == s``."""
        out: dict[str, Any] = {
            "name": self.name, "namespace": self.namespace, "image": self.image,
            "image_pull_policy": self.image_pull_policy, "port": self.port,
            "tf_wiring": self.tf_wiring, "success_policy": self.success_policy,
            "restart_policy": self.restart_policy, "max_restarts": self.max_restarts,
            "schedule_timeout": self.schedule_timeout, "startup_timeout": self.startup_timeout,
            "hide_evaluator": self.hide_evaluator,
        }
        if self.command is not None:
            out["command"] = list(self.command)
        if self.args:
            out["args"] = list(self.args)
        for key in ("env", "resources", "labels", "annotations"):
            if getattr(self, key):
                out[key] = dict(getattr(self, key))
        if self.active_deadline is not None:
            out["active_deadline"] = self.active_deadline
        if self.service_account:
            out["service_account"] = self.service_account
        if self.volumes:
            out["volumes"] = [vol.to_dict() for vol in self.volumes]
        if self.code:
            out["code"] = self.code.to_dict()
        for role, rs in self.roles.items():
            block: dict[str, Any] = {"replicas": rs.replicas, "tracked": rs.tracked,
                                     "restart_policy": rs.restart_policy}
            if rs.image != self.image:
                block["image"] = rs.image
            if rs.command != self.command and rs.command is not None:
                block["command"] = list(rs.command)
            if rs.args != self.args:
                block["args"] = list(rs.args)
            extra_env = {k: val for k, val in rs.env.items() if self.env.get(k) != val}
            if extra_env:
                block["env"] = extra_env
            if dict(rs.resources) != dict(self.resources):
                block["resources"] = dict(rs.resources)
            if rs.node_selector:
                block["node_selector"] = dict(rs.node_selector)
            if rs.tolerations:
                block["tolerations"] = [dict(t) for t in rs.tolerations]
            extra_ann = {k: val for k, val in rs.annotations.items() if self.annotations.get(k) != val}
            if extra_ann:
                block["annotations"] = extra_ann
            out[role] = block
        return out


# --------------------------------------------------------------------- loading
def load_spec_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON spec file into a dict, with a clear error for bad syntax."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(Problem(str(path), f"cannot read spec file: {exc.strerror or exc}",
                                "check the path")) from exc
    try:
        data = yaml.safe_load(text) if path.suffix != ".json" else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise SpecError(Problem(str(path), f"not valid YAML/JSON: {exc}",
                                "fix the syntax at the position shown")) from exc
    if not isinstance(data, dict):
        raise SpecError(Problem(str(path), "the file must hold one mapping (name:, image:, worker: ...)",
                                "see the README's spec format"))
    return data


def apply_overrides(data: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides (values parsed as YAML) to a copy of data."""
    out = copy.deepcopy(dict(data))
    for item in overrides:
        if "=" not in item:
            raise SpecError(Problem(f"--set {item}", "expected key=value",
                                    "write e.g. --set worker.replicas=4"))
        key, _, raw = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise SpecError(Problem(f"--set {item}", "empty key", "write e.g. --set worker.replicas=4"))
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node: dict[str, Any] = out
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return out


class _Parser:
    """Collects every problem of a raw spec, then builds the frozen spec."""

    def __init__(self, data: Mapping[str, Any], max_replicas: int):
        self.data = data
        self.max_replicas = max_replicas
        self.problems: list[Problem] = []

    def add(self, fld: str, message: str, fix: str = "") -> None:
        self.problems.append(Problem(fld, message, fix))

    # -- small typed getters that record problems and return a safe default --
    def _str(self, d: Mapping[str, Any], key: str, fld: str, default: str | None = None) -> str | None:
        val = d.get(key, default)
        if val is None:
            return default
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            self.add(fld, f"must be a string, got {type(val).__name__}", f"write {key}: \"...\"")
            return default
        return str(val)

    def _int(self, d: Mapping[str, Any], key: str, fld: str, default: int) -> int:
        val = d.get(key, default)
        if isinstance(val, bool) or not isinstance(val, int):
            if isinstance(val, str) and val.strip().lstrip("-").isdigit():
                return int(val)
            self.add(fld, f"must be an integer, got {val!r}", f"write {key}: {default}")
            return default
        return val

    def _bool(self, d: Mapping[str, Any], key: str, fld: str, default: bool) -> bool:
        val = d.get(key, default)
        if isinstance(val, bool):
            return val
        if isinstance(val, str) and val.lower() in ("true", "false"):
            return val.lower() == "true"
        self.add(fld, f"must be true or false, got {val!r}", f"write {key}: {str(default).lower()}")
        return default

    def _list_of_str(self, d: Mapping[str, Any], key: str, fld: str) -> tuple[str, ...] | None:
        val = d.get(key)
        if val is None:
            return None
        if isinstance(val, str):
            self.add(fld, "must be a list of strings, got a single string",
                     f"write {key}: [\"python\", \"train.py\"] (one item per argument)")
            return None
        if not isinstance(val, (list, tuple)) or not all(isinstance(x, (str, int, float)) and
                                                          not isinstance(x, bool) for x in val):
            self.add(fld, "must be a list of strings", f"write {key}: [\"...\", \"...\"]")
            return None
        return tuple(str(x) for x in val)

    def _map(self, d: Mapping[str, Any], key: str, fld: str) -> dict[str, Any]:
        val = d.get(key)
        if val is None:
            return {}
        if not isinstance(val, Mapping):
            self.add(fld, f"must be a mapping, got {type(val).__name__}", f"write {key}: {{KEY: VALUE}}")
            return {}
        return dict(val)

    def _duration(self, d: Mapping[str, Any], key: str, fld: str, default: int | None) -> int | None:
        val = d.get(key, default)
        if val is None:
            return None
        secs = v.parse_duration(val)
        if secs is None or secs <= 0:
            self.add(fld, f"must be a positive duration, got {val!r}",
                     "write seconds (300) or a duration like 90s, 5m, 2h")
            return default
        return secs

    def _unknown(self, d: Mapping[str, Any], allowed: set[str], prefix: str) -> None:
        for key in d:
            if key not in allowed:
                fld = f"{prefix}{key}"
                guess = v.did_you_mean(str(key), allowed)
                self.add(fld, "unknown key", f"did you mean '{guess}'?" if guess else
                         f"remove it; known keys: {', '.join(sorted(allowed))}")

    # ------------------------------------------------------------------ parse
    def parse(self) -> TFJobSpec:
        d = self.data
        self._unknown(d, _TOP_KEYS, "")
        name = self._str(d, "name", "name")
        if not name:
            self.add("name", "is required", "add name: my-job (lowercase letters, digits, '-')")
            name = "job"
        else:
            self.problems += v.check_dns_label(name, "name")
        namespace = self._str(d, "namespace", "namespace", "default") or "default"
        self.problems += v.check_dns_label(namespace, "namespace")
        image = self._str(d, "image", "image", "") or ""
        pull = self._str(d, "image_pull_policy", "image_pull_policy", "IfNotPresent") or "IfNotPresent"
        if pull not in PULL_POLICIES:
            self.add("image_pull_policy", f"must be one of {', '.join(PULL_POLICIES)}, got {pull!r}",
                     "write image_pull_policy: IfNotPresent")
        command = self._list_of_str(d, "command", "command")
        args = self._list_of_str(d, "args", "args") or ()
        env = self._env(d, "env", "env")
        resources = self._resources(d, "resources", "resources")
        node_selector = self._labels(d, "node_selector", "node_selector")
        tolerations = self._tolerations(d, "tolerations", "tolerations")
        port = self._int(d, "port", "port", DEFAULT_PORT)
        if not 1 <= port <= 65535:
            self.add("port", f"must be between 1 and 65535, got {port}", f"write port: {DEFAULT_PORT}")
        wiring = self._choice(d, "tf_wiring", WIRINGS, "tf_config")
        success = self._choice(d, "success_policy", SUCCESS_POLICIES, "default")
        restart = self._choice(d, "restart_policy", RESTART_POLICIES, "OnFailure")
        max_restarts = self._int(d, "max_restarts", "max_restarts", 3)
        if max_restarts < 0:
            self.add("max_restarts", f"must be >= 0, got {max_restarts}", "write max_restarts: 3")
        schedule_timeout = self._duration(d, "schedule_timeout", "schedule_timeout", 300) or 300
        startup_timeout = self._duration(d, "startup_timeout", "startup_timeout", 600) or 600
        active_deadline = self._duration(d, "active_deadline", "active_deadline", None)
        labels = self._labels(d, "labels", "labels")
        for key in labels:
            if key.startswith("tfk8s.io/"):
                self.add(f"labels.{key}", "the tfk8s.io/ prefix is reserved for the job's own labels",
                         "use another prefix, e.g. team.example.com/" + key.split("/", 1)[1])
        annotations = self._annotations(d)
        service_account = self._str(d, "service_account", "service_account")
        if service_account:
            self.problems += v.check_dns_subdomain(service_account, "service_account")
        volumes = self._volumes(d)
        hide_evaluator = self._bool(d, "hide_evaluator", "hide_evaluator", False)
        code = self._code(d)

        roles: dict[str, RoleSpec] = {}
        for role in ROLES:
            block = d.get(role)
            if block is None:
                continue
            if isinstance(block, int) and not isinstance(block, bool):
                block = {"replicas": block}
            if not isinstance(block, Mapping):
                self.add(role, f"must be a mapping, got {type(block).__name__}",
                         f"write {role}: {{replicas: 1}}")
                continue
            roles[role] = self._role(role, block, image, command, args, env, resources,
                                     node_selector, tolerations, restart, annotations)
        self._check_roles(roles, success, hide_evaluator, image)
        if self.problems:
            raise SpecError(self.problems)
        return TFJobSpec(
            name=name, namespace=namespace, image=image, image_pull_policy=pull,
            command=command, args=args, env=_frozen_map(env), resources=_frozen_map(resources),
            port=port, tf_wiring=wiring, success_policy=success, restart_policy=restart,
            max_restarts=max_restarts, schedule_timeout=schedule_timeout,
            startup_timeout=startup_timeout, active_deadline=active_deadline,
            labels=_frozen_map(labels), annotations=_frozen_map(annotations),
            service_account=service_account, volumes=volumes, hide_evaluator=hide_evaluator,
            roles=_frozen_map(roles), code=code, raw=_frozen_map(d),
        )

    def _choice(self, d: Mapping[str, Any], key: str, choices: tuple[str, ...], default: str,
                prefix: str = "") -> str:
        val = d.get(key, default)
        if val not in choices:
            self.add(prefix + key, f"must be one of {', '.join(choices)}, got {val!r}",
                     f"write {key}: {default}")
            return default
        return str(val)

    def _env(self, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
        raw = d.get(key)
        if raw is None:
            return {}
        if isinstance(raw, list):  # Kubernetes style [{name: X, value: Y}]
            env: dict[str, Any] = {}
            for i, item in enumerate(raw):
                if not isinstance(item, Mapping) or "name" not in item:
                    self.add(f"{fld}[{i}]", "must be {name: ..., value: ...}", "or write env as a mapping NAME: value")
                    continue
                env[str(item["name"])] = item.get("value", "")
            raw = env
        if not isinstance(raw, Mapping):
            self.add(fld, "must be a mapping of NAME: value", f"write {key}: {{LOG_LEVEL: info}}")
            return {}
        out: dict[str, str] = {}
        for name, value in raw.items():
            name = str(name)
            if not v.is_env_name(name):
                self.add(f"{fld}.{name}", "is not a valid environment variable name",
                         "use letters, digits, '_', '-', '.' and do not start with a digit")
            elif name in RESERVED_ENV or name.startswith(ENV_PREFIX):
                self.add(f"{fld}.{name}", "is set by tfk8s-airflow itself",
                         "remove it; TF_CONFIG and TFK8S_* are derived from the spec")
            if isinstance(value, (dict, list)):
                self.add(f"{fld}.{name}", "value must be a string", "quote it or JSON-encode it")
                continue
            out[name] = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
        return out

    def _resources(self, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
        raw = self._map(d, key, fld)
        out: dict[str, str] = {}
        for rname, qty in raw.items():
            rname = str(rname)
            path = f"{fld}.{rname}"
            if rname not in v.KNOWN_RESOURCES and "/" not in rname:
                guess = v.RESOURCE_ALIASES.get(rname.lower()) or v.did_you_mean(rname, set(v.KNOWN_RESOURCES))
                self.add(path, "unknown resource name",
                         f"did you mean '{guess}'?" if guess
                         else "use cpu, memory, nvidia.com/gpu or a domain/name extended resource")
                continue
            problem = v.check_quantity(qty, path, integer=rname not in ("cpu", "memory", "ephemeral-storage"))
            if problem:
                self.problems.append(problem)
                continue
            out[rname] = str(qty)
        return out

    def _labels(self, d: Mapping[str, Any], key: str, fld: str) -> dict[str, str]:
        raw = self._map(d, key, fld)
        out: dict[str, str] = {}
        for lk, lv in raw.items():
            lk = str(lk)
            self.problems += v.check_label_key(lk, f"{fld}.{lk}")
            lv = "" if lv is None else (str(lv).lower() if isinstance(lv, bool) else str(lv))
            self.problems += v.check_label_value(lv, f"{fld}.{lk}")
            out[lk] = lv
        return out

    def _annotations(self, d: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
        raw = self._map(d, "annotations", prefix + "annotations")
        out: dict[str, str] = {}
        for ak, av in raw.items():
            ak = str(ak)
            self.problems += v.check_label_key(ak, f"{prefix}annotations.{ak}")
            out[ak] = "" if av is None else str(av)
        if sum(len(k) + len(x) for k, x in out.items()) > 256 * 1024:
            self.add("annotations", "total size exceeds 256 KiB", "move large data to a ConfigMap or volume")
        return out

    def _tolerations(self, d: Mapping[str, Any], key: str, fld: str) -> tuple[Mapping[str, Any], ...]:
        raw = d.get(key)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.add(fld, "must be a list of tolerations", "write tolerations: [{key: gpu, operator: Exists}]")
            return ()
        out = []
        allowed = {"key", "operator", "value", "effect", "toleration_seconds", "tolerationSeconds"}
        for i, t in enumerate(raw):
            path = f"{fld}[{i}]"
            if not isinstance(t, Mapping):
                self.add(path, "must be a mapping", "write {key: ..., operator: Exists, effect: NoSchedule}")
                continue
            self._unknown(t, allowed, path + ".")
            op = t.get("operator", "Equal")
            if op not in ("Equal", "Exists"):
                self.add(path + ".operator", f"must be Equal or Exists, got {op!r}", "write operator: Exists")
            eff = t.get("effect")
            if eff is not None and eff not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                self.add(path + ".effect", f"must be NoSchedule, PreferNoSchedule or NoExecute, got {eff!r}",
                         "write effect: NoSchedule")
            if op == "Exists" and t.get("value"):
                self.add(path + ".value", "must be empty when operator is Exists",
                         "remove value or use operator: Equal")
            tol: dict[str, Any] = {}
            for src, dst in (("key", "key"), ("operator", "operator"), ("value", "value"), ("effect", "effect")):
                if t.get(src) is not None:
                    tol[dst] = str(t[src])
            secs = t.get("toleration_seconds", t.get("tolerationSeconds"))
            if secs is not None:
                if isinstance(secs, bool) or not isinstance(secs, int):
                    self.add(path + ".toleration_seconds", "must be an integer", "write toleration_seconds: 300")
                else:
                    tol["tolerationSeconds"] = secs
            out.append(MappingProxyType(tol))
        return tuple(out)

    def _volumes(self, d: Mapping[str, Any]) -> tuple[Volume, ...]:
        raw = d.get("volumes")
        if raw is None:
            return ()
        if isinstance(raw, Mapping):  # {data: {...}, logs: {...}}
            raw = [{"name": k, **(val if isinstance(val, Mapping) else {"_bad": val})} for k, val in raw.items()]
        if not isinstance(raw, list):
            self.add("volumes", "must be a list of {name, mount_path, host_path|pvc}",
                     "write volumes: [{name: data, mount_path: /data, host_path: /mnt/gluster/data}]")
            return ()
        out: list[Volume] = []
        names: set[str] = set()
        paths: set[str] = set()
        for i, item in enumerate(raw):
            path = f"volumes[{i}]"
            if not isinstance(item, Mapping) or "_bad" in item:
                self.add(path, "must be a mapping", "write {name: data, mount_path: /data, host_path: /srv/data}")
                continue
            self._unknown(item, _VOLUME_KEYS, path + ".")
            vname = self._str(item, "name", path + ".name") or ""
            if not vname:
                self.add(path + ".name", "is required", "add name: data")
            else:
                self.problems += v.check_dns_label(vname, path + ".name")
                if vname in names:
                    self.add(path + ".name", f"duplicate volume name {vname!r}", "give each volume its own name")
                names.add(vname)
            mount = self._str(item, "mount_path", path + ".mount_path") or ""
            if not mount.startswith("/"):
                self.add(path + ".mount_path", f"must be an absolute path, got {mount!r}", "write mount_path: /data")
            elif mount in paths:
                self.add(path + ".mount_path", f"{mount} is mounted twice", "give each volume its own mount_path")
            paths.add(mount)
            host = self._str(item, "host_path", path + ".host_path")
            pvc = self._str(item, "pvc", path + ".pvc")
            if bool(host) == bool(pvc):
                self.add(path, "needs exactly one of host_path or pvc",
                         "write host_path: /mnt/tfk8s-gluster/data (a node-mounted GlusterFS) or pvc: claim-name")
            if host and not host.startswith("/"):
                self.add(path + ".host_path", f"must be an absolute path, got {host!r}", "write host_path: /mnt/...")
            if pvc:
                self.problems += v.check_dns_subdomain(pvc, path + ".pvc")
            sub = self._str(item, "sub_path", path + ".sub_path")
            if sub and not is_safe_relative(sub):
                self.add(path + ".sub_path", "must be a relative path without '..'", "write sub_path: models/run1")
            out.append(Volume(vname, mount, host or None, pvc or None,
                              self._bool(item, "read_only", path + ".read_only", False), sub or None))
        return tuple(out)

    def _code(self, d: Mapping[str, Any]) -> CodeSource | None:
        raw = d.get("code")
        if raw is None:
            return None
        if isinstance(raw, str):
            raw = {"uri": raw}
        if not isinstance(raw, Mapping):
            self.add("code", "must be a mapping", "write code: {uri: https://host/algo.tar.gz, entrypoint: run.sh}")
            return None
        self._unknown(raw, _CODE_KEYS, "code.")
        uri = self._str(raw, "uri", "code.uri") or ""
        if not uri.startswith(("http://", "https://", "hdfs://", "webhdfs://")):
            self.add("code.uri", f"must be an http(s):// or hdfs:// URI, got {uri!r}",
                     "write code: {uri: https://host/algo.tar.gz}")
        entry = self._str(raw, "entrypoint", "code.entrypoint", "run.sh") or "run.sh"
        if not is_safe_relative(entry):
            self.add("code.entrypoint", "must be a relative path inside the code archive", "write entrypoint: run.sh")
        sha = self._str(raw, "sha256", "code.sha256")
        if sha and not v.is_sha256(sha):
            self.add("code.sha256", "must be 64 hex characters", "write the output of sha256sum")
        img = self._str(raw, "image", "code.image")
        if img:
            self.problems += v.check_image(img, "code.image")
        mount = self._str(raw, "mount_path", "code.mount_path", DEFAULT_CODE_DIR) or DEFAULT_CODE_DIR
        if not mount.startswith("/"):
            self.add("code.mount_path", "must be an absolute path", "write mount_path: /opt/tfk8s/code")
        return CodeSource(uri, entry, sha.lower() if sha else None, img or None, mount)

    def _role(self, role: str, block: Mapping[str, Any], image: str, command: tuple[str, ...] | None,
              args: tuple[str, ...], env: dict[str, str], resources: dict[str, str],
              node_selector: dict[str, str], tolerations: tuple[Mapping[str, Any], ...],
              restart: str, annotations: dict[str, str]) -> RoleSpec:
        p = f"{role}."
        self._unknown(block, _ROLE_KEYS, p)
        replicas = self._int(block, "replicas", p + "replicas", 1 if role != "ps" else 0)
        r_image = self._str(block, "image", p + "image") or image
        r_command = self._list_of_str(block, "command", p + "command")
        r_args = self._list_of_str(block, "args", p + "args")
        r_env = {**env, **self._env(block, "env", p + "env")}
        r_res = self._resources(block, "resources", p + "resources") if "resources" in block else resources
        r_sel = self._labels(block, "node_selector", p + "node_selector") if "node_selector" in block else node_selector
        r_tol = self._tolerations(block, "tolerations", p + "tolerations") if "tolerations" in block else tolerations
        default_restart = "Never" if role == "ps" else restart
        r_restart = self._choice(block, "restart_policy", RESTART_POLICIES, default_restart, p)
        if role == "ps" and r_restart != "Never":
            self.add(p + "restart_policy", "a parameter server loses every variable when it restarts",
                     "use Never: a dead PS fails the job, and a retry of the group resumes from the checkpoint")
        default_tracked = role != "ps"
        tracked = self._bool(block, "tracked", p + "tracked", default_tracked)
        if role == "ps" and tracked:
            self.add(p + "tracked", "parameter servers never exit, so they cannot be tracked",
                     "remove tracked from ps")
        r_annotations = {**annotations, **self._annotations(block, p)}
        return RoleSpec(role=role, replicas=replicas, image=r_image, annotations=_frozen_map(r_annotations),
                        command=r_command if r_command is not None else command,
                        args=r_args if r_args is not None else args,
                        env=_frozen_map(r_env), resources=_frozen_map(r_res),
                        node_selector=_frozen_map(r_sel), tolerations=r_tol,
                        restart_policy=r_restart, tracked=tracked)

    def _check_roles(self, roles: dict[str, RoleSpec], success: str, hide_evaluator: bool,
                     image: str) -> None:
        worker = roles.get("worker")
        if worker is None:
            self.add("worker", "is required", "add worker: {replicas: 2}")
        elif worker.replicas < 1:
            self.add("worker.replicas", f"must be at least 1, got {worker.replicas}", "write worker: {replicas: 1}")
        for role, limit in (("chief", 1), ("evaluator", 1)):
            rs = roles.get(role)
            if rs and not 0 <= rs.replicas <= limit:
                self.add(f"{role}.replicas", f"must be 0 or 1, got {rs.replicas}",
                         f"write {role}: {{replicas: 1}}; TensorFlow has one {role}")
        ps = roles.get("ps")
        if ps and ps.replicas < 0:
            self.add("ps.replicas", f"must be >= 0, got {ps.replicas}", "write ps: {replicas: 1}")
        total = sum(max(r.replicas, 0) for r in roles.values())
        if total > self.max_replicas:
            self.add("replicas", f"the job has {total} replicas, more than the maximum {self.max_replicas}",
                     "use fewer replicas or raise the maximum (--max-replicas / TFK8S_MAX_REPLICAS)")
        if not image and not any(rs.image for rs in roles.values()):
            self.add("image", "is required", "add image: registry.example.com/team/trainer:1.0")
        checked: set[tuple[str, str]] = {("image", "")}
        if image:
            checked.add(("image", image))
            self.problems += v.check_image(image, "image")
        for rs in roles.values():
            if rs.replicas <= 0:
                continue
            fld = "image" if rs.image == image else f"{rs.role}.image"
            if (fld, rs.image) in checked:
                continue
            checked.add((fld, rs.image))
            if not rs.image:
                self.add(fld, "is required", "add image: registry.example.com/team/trainer:1.0")
            else:
                self.problems += v.check_image(rs.image, fld)
        has_chief = bool(roles.get("chief") and roles["chief"].replicas)
        if worker and worker.replicas >= 1 and not worker.tracked:
            if not has_chief:
                self.add("worker.tracked", "untracked workers need a chief to decide success",
                         "add chief: {replicas: 1} (TF2 ParameterServerStrategy) or remove tracked: false")
            if success == "all_workers":
                self.add("success_policy", "all_workers conflicts with worker.tracked: false",
                         "use success_policy: default, or track the workers")
        chief = roles.get("chief")
        if chief and chief.replicas and not chief.tracked:
            self.add("chief.tracked", "the chief decides success and must be tracked", "remove tracked: false")
        if hide_evaluator and not (roles.get("evaluator") and roles["evaluator"].replicas):
            self.add("hide_evaluator", "is set but the job has no evaluator",
                     "add evaluator: {replicas: 1} or remove hide_evaluator")

