"""What the deployment decides for every job, whatever its spec says (the spec may not override it).

Why separate from the spec: the spec comes from DAG authors and, through ``params``, from
anyone allowed to trigger a DAG; these bounds come from whoever runs Airflow. They are read
from Airflow's configuration section ``[tfk8s]`` (so ``AIRFLOW__TFK8S__<NAME>`` works) by
:mod:`tfk8s_airflow.deployment`, and the same way without Airflow by the ``tfk8s`` CLI
(:mod:`tfk8s_airflow.job.policy.settings`); ``TFK8S_<NAME>`` variables are the fallback of both.
This module parses them (:data:`SETTINGS`), holds them, admits
or refuses a spec (:meth:`DeploymentPolicy.problems`) and says what every pod gets from them
(:meth:`DeploymentPolicy.pod_security`).

What a spec may ask of a node is bounded here, not by the spec: the host paths it mounts
(a hostPath of ``/`` is the node), the ServiceAccount its pods run as (and whether they get
its token), the Secrets of the namespace it reads, and the privileges of its containers
(none, by default: no privilege escalation, no capabilities, the runtime's seccomp profile).

``default_active_deadline``: a job whose spec sets no ``active_deadline`` still ends. Without
it a job that landed on the wrong nodes, or whose teardown never ran, would keep its
parameter servers forever (they never exit on their own). The pods get it as
``activeDeadlineSeconds``, so Kubernetes itself stops them even if Airflow is gone.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfk8s_airflow.configspec import read, setting
from tfk8s_airflow.contract import LABEL_SECRET, STAGING_NAME_PREFIX
from tfk8s_airflow.exceptions import Problem, SpecError
from tfk8s_airflow.job.policy.confinement import apparmor_annotation_problems, selinux_problems, volume_kind_problems
from tfk8s_airflow.job.policy.preflight import ENFORCE, parse_mode
from tfk8s_airflow.job.policy.tensorboard_url import url_template_problem
from tfk8s_airflow.job.spec.fields import MAX_DURATION_S, check_dns_label, parse_duration, show
from tfk8s_airflow.job.spec.model import ADMISSIONS
from tfk8s_airflow.job.spec.podtemplate import merge
from tfk8s_airflow.pathrules import has_parent_segment
from tfk8s_airflow.volume.hostpath import HostPathView, walk_host_path

if TYPE_CHECKING:
    from tfk8s_airflow.job.spec import TFJobSpec

#: 24 hours: long enough for a day's retraining, short enough that a forgotten job ends.
DEFAULT_ACTIVE_DEADLINE_S = 24 * 3600
#: Where the nodes (and the Airflow workers) mount the GlusterFS volume (``TFK8S_GLUSTER_MOUNT``).
DEFAULT_GLUSTER_MOUNT = "/mnt/tfk8s-gluster"
ANY = "*"
#: 24 hours: the longest a spec's schedule_timeout may be by default (setup's pre-flight waits that long).
DEFAULT_MAX_SCHEDULE_TIMEOUT_S = 24 * 3600
#: The evaluation pods' image when the deployment names none: the package's own trainer image.
DEFAULT_EVALUATION_IMAGE = "tfk8s/trainer:0.1"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


# --------------------------------------------------------------------- reading the settings
def _duration(raw: Any) -> int | Problem:
    secs = parse_duration(raw)
    if secs is None or not 0 < secs <= MAX_DURATION_S:
        return Problem("", f"must be a positive duration such as 86400, 90m or 2d, got {show(raw)}",
                       "correct the deployment's setting")
    return secs


def _path(raw: Any) -> str | Problem:
    text = str(raw).strip()
    if not text.startswith("/") or has_parent_segment(text):
        return Problem("", f"must be an absolute path without '..', got {show(raw)}",
                       "correct the deployment's setting")
    return posixpath.normpath(text)


def _words(raw: Any) -> list[str]:
    items = raw if isinstance(raw, (list, tuple)) else str(raw).replace(",", " ").split()
    return [str(x).strip() for x in items if str(x).strip()]


def _host_paths(raw: Any) -> tuple[str, ...] | Problem:
    out = []
    for word in _words(raw):
        path = _path(word)
        if isinstance(path, Problem):
            return path
        if path == "/":
            return Problem("", "/ would let every job mount the node's whole file system",
                           "list the directories jobs may mount, e.g. /mnt/tfk8s-gluster")
        out.append(path)
    return tuple(out)


def _names(raw: Any) -> tuple[str, ...]:
    return tuple(_words(raw))


def _namespace(raw: Any) -> str | Problem:
    text = str(raw).strip()
    if not _DNS_LABEL.match(text):
        return Problem("", f"must be a namespace name, got {show(raw)}", "correct the deployment's setting")
    return text


def _secret_names(raw: Any) -> tuple[str, ...] | Problem:
    """``name``, ``*``, ``namespace/name`` or ``namespace/*``."""
    out = []
    for word in _words(raw):
        ns, _, name = word.rpartition("/")
        if (ns and not _DNS_LABEL.match(ns)) or not name or "/" in ns:
            return Problem("", f"entries are name, *, namespace/name or namespace/*, got {show(word)}",
                           "correct the deployment's setting")
        out.append(word)
    return tuple(out)


def _image(raw: Any) -> str | Problem:
    text = str(raw).strip()
    if not text or any(c.isspace() for c in text):
        return Problem("", f"must be an image reference, got {show(raw)}", "correct the deployment's setting")
    return text


def _ingress(raw: Any) -> tuple[str, ...] | Problem:
    out = []
    for word in _words(raw):
        if word.startswith("namespace:"):
            if not _DNS_LABEL.match(word[len("namespace:"):]):
                return Problem("", f"namespace:<name> needs a namespace name, got {show(word)}",
                               "correct the deployment's setting")
        else:
            try:
                word = str(ipaddress.ip_network(word, strict=False))
            except ValueError:
                return Problem("", f"entries are CIDRs (10.0.0.0/8) or namespace:<name>, got {show(word)}",
                               "correct the deployment's setting")
        out.append(word)
    return tuple(out)


def _bool(raw: Any) -> bool | Problem:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    return Problem("", f"must be true or false, got {show(raw)}", "correct the deployment's setting")


def _url_template(raw: Any) -> str | Problem:
    text = str(raw).strip()
    problem = url_template_problem(text)
    if problem:
        return Problem("", f"{problem}, got {show(raw)}", "correct the deployment's setting (docs/observability.md)")
    return text


def _queue(raw: Any) -> str | Problem:
    text = str(raw).strip()
    problems = check_dns_label(text, "default_queue")
    if problems:
        return Problem("", problems[0].message, "name a LocalQueue (a DNS-1123 label)")
    return text


def _admission(raw: Any) -> str | Problem:
    text = str(raw).strip().lower()
    if text in ADMISSIONS:
        return text
    return Problem("", f"must be one of {', '.join(ADMISSIONS)}, got {show(raw)}",
                   "correct the setting (docs/jobs.md#admission)")


@dataclass(frozen=True)
class DeploymentPolicy:
    """The deployment's bounds on every job; each field is a setting of ``[tfk8s]``."""

    default_active_deadline: int = field(default=DEFAULT_ACTIVE_DEADLINE_S, metadata=setting(
        "the pods' activeDeadlineSeconds when the spec sets no active_deadline (a duration)", "86400 (24 h)",
        _duration, kind="string", example="12h"))
    gluster_mount: str = field(default=DEFAULT_GLUSTER_MOUNT, metadata=setting(
        "where the nodes mount the GlusterFS volume; a default allowed host path", DEFAULT_GLUSTER_MOUNT, _path))
    root: str = field(default="", metadata=setting(
        "the DAGs' data and model root (`TFK8S_ROOT`); also a default allowed host path when set", "unset", _path))
    allowed_host_paths: tuple[str, ...] = field(default=(), metadata=setting(
        "host paths a volume may mount, the paths and everything under them (comma-separated); never /",
        "gluster_mount and root", _host_paths, example="/mnt/tfk8s-gluster/tfk8s,/mnt/datasets"))
    allowed_service_accounts: tuple[str, ...] = field(default=(), metadata=setting(
        "ServiceAccounts a spec may name (comma-separated, or *)", "none: the namespace's default only", _names,
        example="tf-trainer"))
    allow_service_account_token: bool = field(default=False, metadata=setting(
        "whether a spec may ask for automount_service_account_token: true", "false", _bool))
    allowed_secrets: tuple[str, ...] = field(default=(), metadata=setting(
        "Secrets a spec may read through env, env_from and volumes (comma-separated): `namespace/name`, "
        "`namespace/*`, or a plain `name` (or *) for the default_namespace only", "none", _secret_names,
        example="db,ml-team/registry-creds"))
    allowed_image_pull_secrets: tuple[str, ...] = field(default=(ANY,), metadata=setting(
        "Secrets of the job's namespace a pod template may name in imagePullSecrets (comma-separated, or *): "
        "the kubelet reads them to pull the image, the pods never do", "*: every Secret of the namespace",
        _names))
    restricted_security_context: bool = field(default=True, metadata=setting(
        "every container without privilege escalation, with all capabilities dropped and the "
        "RuntimeDefault seccomp profile", "true", _bool))
    run_as_non_root: bool = field(default=False, metadata=setting(
        "every pod with runAsNonRoot: true (the kubelet refuses images that run as root)", "false", _bool))
    allowed_volume_types: tuple[str, ...] = field(default=(), metadata=setting(
        "volume kinds past the cluster's claims a pod may use: csi (inline), nfs in a pod template; any other "
        "kind (iscsi, rbd, glusterfs...) at a pod's admission (comma-separated, or *)", "none", _names,
        example="csi,nfs"))
    default_namespace: str = field(default="default", metadata=setting(
        "the namespace plain allowed_secrets entries (a name without `namespace/`, or *) apply to",
        "default", _namespace))
    read_only_host_paths: tuple[str, ...] = field(default=(), metadata=setting(
        "host paths a volume may mount read-only only, and everything under them (comma-separated): every "
        "pod mounts them read-only, sidecars included; a writable mount of a directory above one, or through a "
        "symbolic link, is refused, and so is a host path the deciding process cannot see",
        "none", _host_paths, example="/mnt/datasets"))
    evaluation_image: str = field(default=DEFAULT_EVALUATION_IMAGE, metadata=setting(
        "the image of every evaluation pod (its evaluator's code): never the job's form's; the DAG author may "
        "choose the job's own with TFEvaluateOperator(use_job_image=True)", DEFAULT_EVALUATION_IMAGE, _image))
    tensorboard_ingress: tuple[str, ...] = field(default=(), metadata=setting(
        "where a job's TensorBoard port may be reached from, beyond the job's own pods (comma-separated CIDRs "
        "such as 10.0.0.0/8, or `namespace:<name>`)", "none: the job's pods only", _ingress,
        example="10.0.0.0/8,namespace:monitoring"))
    tensorboard_url: str = field(default="", metadata=setting(
        "where a browser opens a job's TensorBoard: a URL template with {job} {namespace} {service} {pod} "
        "{port} {host} {pod_ip}, e.g. http://{pod_ip}:{port}/", "unset: TensorBoard runs, without a link",
        _url_template, example="http://{pod_ip}:{port}/"))
    preflight: str = field(default=ENFORCE, metadata=setting(
        "the pre-flight verdict before setup creates a job: enforce (never fails it, waits waits for room up to "
        "schedule_timeout), warn (logs the verdict, creates the job anyway: for clusters with an autoscaler) or off",
        "enforce", parse_mode))

    default_queue: str = field(default="", metadata=setting(
        "the Kueue LocalQueue of every job whose spec names no queue (its namespace must have one and be managed by "
        "Kueue; docs/jobs.md)", "unset: no queue", _queue, example="team-a"))
    admission: str = field(default="auto", metadata=setting(
        "who admits a job whose spec names no admission: auto, gate, kueue or workload (the spec's `admission`, "
        "docs/jobs.md#admission)", "auto", _admission))
    auto_workload: bool = field(default=False, metadata=setting(
        "whether admission auto uses Kubernetes' Workload API (kube-scheduler places a job's pods all together or "
        "none) where the cluster serves it (scheduling.k8s.io/v1beta1 PodGroups, Kubernetes 1.37+ with the "
        "GenericWorkload feature gate); the Airflow connection then needs the Workload and PodGroup rights of "
        "deploy/rbac.yaml", "false", _bool))
    max_schedule_timeout: int = field(default=DEFAULT_MAX_SCHEDULE_TIMEOUT_S, metadata=setting(
        "the longest schedule_timeout a spec may set (a duration): setup's pre-flight may wait that long for room "
        "while it holds a worker slot", "86400 (24 h)", _duration))
    allowed_queues: tuple[str, ...] = field(default=(ANY,), metadata=setting(
        "Kueue LocalQueues a spec's queue may name (comma-separated, or *); default_queue is always allowed",
        "*: every queue", _names))
    allowed_priority_classes: tuple[str, ...] = field(default=(ANY,), metadata=setting(
        "priority classes a spec may name (comma-separated, or *): its priority_class (Kueue's "
        "WorkloadPriorityClass) and a pod template's priorityClassName (Kubernetes' PriorityClass)",
        "*: every class", _names))

    def __post_init__(self) -> None:
        if not self.allowed_host_paths:  # the default: the volume and the DAGs' root
            roots = tuple(dict.fromkeys(p for p in (self.gluster_mount, self.root) if p))
            object.__setattr__(self, "allowed_host_paths", roots)

    # ----------------------------------------------------------------- reading
    @classmethod
    def from_settings(cls, get: Callable[[str], Any]) -> DeploymentPolicy:
        """From a lookup ``get(name) -> value or None`` (Airflow config, or the environment).

        Every setting is checked; a bad one is a SpecError naming ``[tfk8s] <name>``.
        """
        return cls(**read(cls, get))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DeploymentPolicy:
        """From ``TFK8S_<NAME>`` variables (``TFK8S_ALLOWED_HOST_PATHS``...)."""
        return cls.from_settings(lambda name: env.get(f"TFK8S_{name.upper()}"))

    # ----------------------------------------------------------------- deciding
    def active_deadline(self, spec: Any) -> int:
        """The job's deadline in seconds: the spec's, else the deployment's default."""
        return int(spec.active_deadline or self.default_active_deadline)

    def problems(self, spec: TFJobSpec, realpath: Callable[[str], str] = os.path.realpath) -> list[Problem]:
        """Why the deployment refuses the spec; [] when it admits it.

        Each problem names the spec's field and the setting that would admit it. Host paths
        are also resolved on this machine (``realpath``): the Airflow workers mount the same
        GlusterFS volume, so a symbolic link that a job left on it, pointing out of the
        allowed paths, is seen here too.
        """
        out: list[Problem] = []
        for i, vol in enumerate(spec.volumes):
            if vol.host_path:
                where = posixpath.join(vol.host_path, vol.sub_path) if vol.sub_path else vol.host_path
                found = self.host_path_problems(f"volumes[{i}].host_path", vol.host_path, realpath)
                if not found and not vol.read_only and not _under(posixpath.normpath(where), self.read_only_host_paths):
                    found = self.writable_path_problems(f"volumes[{i}].host_path", where)
                out += found
        account = spec.service_account
        if account and account != "default" and not _allowed(account, self.allowed_service_accounts):
            out.append(Problem("service_account", f"{account} is not among the allowed ServiceAccounts "
                                                  f"({', '.join(self.allowed_service_accounts) or 'none'}: only "
                                                  "the namespace's default)",
                               "remove service_account, or an administrator adds it to "
                               "[tfk8s] allowed_service_accounts"))
        if spec.automount_service_account_token and not self.allow_service_account_token:
            out.append(Problem("automount_service_account_token",
                               "the deployment does not give pods their ServiceAccount's API token",
                               "remove it, or an administrator sets [tfk8s] allow_service_account_token = true"))
        for fld, secret in secret_references(spec):
            problem = self.secret_problem(fld, spec.namespace, secret)
            if problem:
                out.append(problem)
        out += self._templates(spec, realpath)
        out += self._spec_confinement(spec)
        out += self._scheduling(spec)
        return out

    def _scheduling(self, spec: TFJobSpec) -> list[Problem]:
        """The spec's schedule_timeout, queue and priority class, within the deployment's bounds."""
        out: list[Problem] = []
        if spec.schedule_timeout > self.max_schedule_timeout:
            out.append(Problem("schedule_timeout", f"{spec.schedule_timeout}s is longer than the deployment allows "
                                                   f"({self.max_schedule_timeout}s: setup may wait that long for "
                                                   "room)",
                               f"write schedule_timeout: {self.max_schedule_timeout} or less, or an administrator "
                               "raises [tfk8s] max_schedule_timeout"))
        if spec.queue and spec.queue != self.default_queue and not _allowed(spec.queue, self.allowed_queues):
            out.append(Problem("queue", f"{spec.queue} is not among the allowed queues "
                                        f"({', '.join(self.allowed_queues) or 'none'})",
                               "remove queue (the deployment's default_queue applies), or an administrator adds it "
                               "to [tfk8s] allowed_queues"))
        if spec.priority_class:
            out += self.priority_class_problems("priority_class", spec.priority_class)
        return out

    def priority_class_problems(self, fld: str, name: Any) -> list[Problem]:
        """A priority class (Kueue's or Kubernetes') that ``allowed_priority_classes`` does not hold."""
        if _allowed(str(name), self.allowed_priority_classes):
            return []
        return [Problem(fld, f"priority class {str(name)[:63]} is not among the allowed priority classes "
                             f"({', '.join(self.allowed_priority_classes) or 'none'})",
                        "remove it, or an administrator adds it to [tfk8s] allowed_priority_classes")]

    def _spec_confinement(self, spec: TFJobSpec) -> list[Problem]:
        """AppArmor annotations the spec's ``annotations`` put on the pods (job-wide and per role)."""
        if not self.restricted_security_context:
            return []
        admin = "an administrator sets [tfk8s] restricted_security_context = false"
        out = apparmor_annotation_problems(spec.annotations, "annotations", admin)
        for role, rs in spec.roles.items():
            if rs.replicas > 0 and rs.annotations is not spec.annotations:
                out += [p for p in apparmor_annotation_problems(rs.annotations, f"{role}.annotations", admin)
                        if not any(q.message == p.message for q in out)]
        return out

    def host_path_problems(self, fld: str, host_path: str, realpath: Callable[[str], str] = os.path.realpath
                           ) -> list[Problem]:
        """Why a hostPath ``host_path`` may not be mounted, resolved through ``realpath`` now: [] when it may.

        With ``read_only_host_paths`` set, the path is also walked on this machine from its allowed root
        (:func:`~tfk8s_airflow.volume.hostpath.walk_host_path`): where this process cannot see that root
        (recovery in a triggerer that does not mount the volume, say) the path is refused, not trusted as
        written. Whether a writable mount may pass through a link: :meth:`writable_path_problems`."""
        out = self._host_path(fld, host_path, realpath)
        if out or not self.read_only_host_paths:
            return out
        view = self._walk(host_path)
        if not view.seen:
            return [Problem(fld, f"{show(host_path)} cannot be checked here for symbolic links: its allowed root "
                                 f"{view.root} cannot be opened by this process ({view.why}); with "
                                 "read_only_host_paths set, a host path is admitted only where it can be walked",
                            f"mount the volume at {view.root} where setup, recovery (the triggerer) and staging run, "
                            "or an administrator clears [tfk8s] read_only_host_paths")]
        return []

    def writable_path_problems(self, fld: str, host_path: str) -> list[Problem]:
        """Why ``host_path`` (a hostPath and its subPath) may not be mounted writable: with ``read_only_host_paths``
        set, a symbolic link in it below its allowed root (the kubelet follows it when it mounts: a link a pod
        planted through a writable mount leads into a read-only tree, or out of one); [] otherwise."""
        if not self.read_only_host_paths or not _under(posixpath.normpath(host_path), self._roots()):
            return []
        view = self._walk(host_path)
        if view.link is None:
            return []
        return [Problem(fld, f"{show(view.link)} is a symbolic link: with read_only_host_paths set, a writable mount "
                             "may not pass through one (the kubelet would follow it, into a read-only tree or out of "
                             "one)", "mount the directory it should be, not a link to it, or mount it read_only")]

    def _roots(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.allowed_host_paths, *self.read_only_host_paths)))

    def _walk(self, host_path: str) -> HostPathView:
        return walk_host_path(host_path, self._roots())

    def _host_path(self, fld: str, host_path: str, realpath: Callable[[str], str]) -> list[Problem]:
        roots = tuple(dict.fromkeys((*self.allowed_host_paths, *self.read_only_host_paths)))
        shown = ", ".join(roots) or "none"
        path = posixpath.normpath(host_path)
        fix = ("use a path under them, or an administrator adds it to [tfk8s] allowed_host_paths "
               "(or AIRFLOW__TFK8S__ALLOWED_HOST_PATHS)")
        if path == "/":
            return [Problem(fld, f"/ is the node's whole file system; the allowed host paths are {shown}",
                            "use a path under them")]
        if not _under(path, roots):
            return [Problem(fld, f"{show(host_path)} is outside the allowed host paths {shown}", fix)]
        real = posixpath.normpath(realpath(path))
        if real != path and not _under(real, roots) and not _under(real, [realpath(r) for r in roots]):
            return [Problem(fld, f"{show(host_path)} resolves (through a symbolic link) to {show(real)}, outside "
                                 f"the allowed host paths {shown}",
                            "remove the link, or use the directory it should be")]
        return []

    def _templates(self, spec: TFJobSpec, realpath: Callable[[str], str]) -> list[Problem]:
        """Everything the pod templates add, as the pods will have it (the deployment's security defaults
        with the template's merged over them), in every container: the template cannot get past the policy.

        A role's problem that its template inherited from the job's is named once, at the job's.
        """
        top = self._template(spec.pod_template, "pod_template", realpath, spec.namespace) if spec.pod_template \
            else []
        seen = {(p.field, p.message) for p in top}
        out = list(top)
        for role, rs in spec.roles.items():
            if not rs.pod_template or rs.replicas <= 0:
                continue
            prefix = f"{role}.pod_template"
            for p in self._template(rs.pod_template, prefix, realpath, spec.namespace):
                if ("pod_template" + p.field[len(prefix):], p.message) not in seen:
                    out.append(p)
        return out

    def _template(self, tpl: Mapping[str, Any], prefix: str, realpath: Callable[[str], str],
                  namespace: str = "") -> list[Problem]:
        out: list[Problem] = []
        pod_default, container_default, _ = self.pod_security(None)
        spec = tpl.get("spec") or {}
        p = f"{prefix}.spec"
        admin = "an administrator sets [tfk8s] restricted_security_context = false"
        for vol in spec.get("volumes") or ():
            vp = f"{p}.volumes[{vol.get('name')}]"
            out += volume_kind_problems(vol, vp, self.allowed_volume_types)
            if isinstance(vol.get("hostPath"), Mapping) and isinstance(vol["hostPath"].get("path"), str):
                out += self.host_path_problems(f"{vp}.hostPath.path", vol["hostPath"]["path"], realpath)
            for i, source in enumerate((vol.get("projected") or {}).get("sources") or ()):
                if source.get("serviceAccountToken") is not None and not self.allow_service_account_token:
                    out.append(Problem(f"{vp}.projected.sources[{i}].serviceAccountToken",
                                       "the deployment does not give pods a ServiceAccount's API token",
                                       "remove it, or an administrator sets [tfk8s] allow_service_account_token "
                                       "= true"))
        out += self.template_secret_problems(tpl, p, namespace)
        if spec.get("priorityClassName"):
            out += self.priority_class_problems(f"{p}.priorityClassName", spec["priorityClassName"])
        pod_sc = merge(pod_default, spec.get("securityContext") or {}, {})
        if self.restricted_security_context:
            out += apparmor_annotation_problems((tpl.get("metadata") or {}).get("annotations"),
                                                f"{prefix}.metadata.annotations", admin)
            out += host_namespace_problems(spec, p, admin)
            out += _restricted(pod_sc, f"{p}.securityContext", admin)
        out += self._non_root(pod_sc, f"{p}.securityContext")
        for kind in ("containers", "initContainers"):
            for c in spec.get(kind) or ():
                cp = f"{p}.{kind}[{c.get('name')}]"
                sc = merge(container_default, c.get("securityContext") or {}, {})
                if self.restricted_security_context:
                    out += _restricted(sc, f"{cp}.securityContext", admin, container=True)
                    for port in c.get("ports") or ():
                        if port.get("hostPort"):
                            out.append(Problem(f"{cp}.ports[{port.get('containerPort')}].hostPort",
                                               "the deployment's pods do not bind the node's ports",
                                               "remove it (peers reach the pod through the job's Service), "
                                               f"or {admin}"))
                out += self._non_root(sc, f"{cp}.securityContext")
        return out

    # ----------------------------------------------------------------- Secrets, by namespace
    def secret_allowed(self, namespace: str, secret: str) -> bool:
        """Whether pods of ``namespace`` may read Secret ``secret``: an entry ``namespace/name`` or
        ``namespace/*`` of ``allowed_secrets``, or a plain ``name`` or ``*`` where ``namespace`` is the
        deployment's ``default_namespace`` (a plain name never reaches another namespace's Secret)."""
        for entry in self.allowed_secrets:
            ns, _, name = entry.rpartition("/")
            if (ns or self.default_namespace) == namespace and name in (ANY, secret):
                return True
        return False

    def secret_problem(self, fld: str, namespace: str, secret: str) -> Problem | None:
        if secret.startswith(STAGING_NAME_PREFIX):  # a staging task's own (its HDFS delegation token)
            return Problem(fld, f"Secret {secret} is a name tfk8s-airflow keeps for its staging tasks' own Secrets "
                                "(an HDFS delegation token); no job may read one, whatever allowed_secrets says",
                           "name another Secret")
        if self.secret_allowed(namespace, secret):
            return None
        shown = ", ".join(self.allowed_secrets) or "none"
        if namespace == self.default_namespace:
            return Problem(fld, f"Secret {secret} is not among the allowed secrets ({shown})",
                           "an administrator adds it to [tfk8s] allowed_secrets (or * for every Secret of the "
                           "namespace)")
        return Problem(fld, f"Secret {secret} of namespace {namespace} is not among the allowed secrets ({shown}; "
                            f"plain names are namespace {self.default_namespace}'s only)",
                       f"an administrator adds {namespace}/{secret} to [tfk8s] allowed_secrets (or {namespace}/* "
                       "for every Secret of the namespace)")

    def template_secret_problems(self, tpl: Mapping[str, Any], prefix: str, namespace: str) -> list[Problem]:
        """The Secrets and image pull secrets a pod (template) names that the deployment does not allow."""
        out = [p for fld, secret in template_secrets(tpl, prefix)
               if (p := self.secret_problem(fld, namespace, secret)) is not None]
        allowed = self.allowed_image_pull_secrets
        out.extend(Problem(fld, f"Secret {secret} is not among the allowed image pull secrets "
                                f"({', '.join(allowed) or 'none'})",
                           "an administrator adds it to [tfk8s] allowed_image_pull_secrets (or * for every Secret "
                           "of the namespace)")
                   for fld, secret in template_pull_secrets(tpl, prefix) if not _allowed(secret, allowed))
        return out

    def service_account_allowed(self, account: str) -> bool:
        return _allowed(account, self.allowed_service_accounts)

    def non_root_problems(self, sc: Mapping[str, Any], fld: str) -> list[Problem]:
        """What ``run_as_non_root`` refuses in one securityContext (as the pod has it)."""
        return self._non_root(sc, fld)

    def _non_root(self, sc: Mapping[str, Any], fld: str) -> list[Problem]:
        if not self.run_as_non_root:
            return []
        fix = "remove it, or an administrator sets [tfk8s] run_as_non_root = false"
        out = []
        if sc.get("runAsNonRoot") is False:
            out.append(Problem(f"{fld}.runAsNonRoot", "the deployment runs every pod as non-root", fix))
        if sc.get("runAsUser") == 0:
            out.append(Problem(f"{fld}.runAsUser", "0 is root; the deployment runs every pod as non-root", fix))
        return out

    def admit(self, spec: TFJobSpec) -> TFJobSpec:
        """The spec, when the deployment admits it; SpecError listing every refusal otherwise."""
        problems = self.problems(spec)
        if problems:
            raise SpecError(problems)
        return spec

    def pod_security(self, spec: TFJobSpec | None) -> tuple[dict[str, Any], dict[str, Any], bool]:
        """(the pod's securityContext, every container's securityContext, automountServiceAccountToken).

        A pod template's security contexts are merged over these (its containers' over the container's).
        """
        pod: dict[str, Any] = {}
        container: dict[str, Any] = {}
        if self.run_as_non_root:
            pod["runAsNonRoot"] = True
        if self.restricted_security_context:
            pod["seccompProfile"] = {"type": "RuntimeDefault"}
            container = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
        token = bool(spec is not None and spec.automount_service_account_token and self.allow_service_account_token)
        return pod, container, token


def secret_references(spec: TFJobSpec) -> Iterator[tuple[str, str]]:
    """(spec field, Secret name) for every Secret the job's pods would read."""
    for i, vol in enumerate(spec.volumes):
        if vol.secret:
            yield f"volumes[{i}].secret", vol.secret
    yield from _env_secrets(spec.env, spec.env_from, "", {}, ())
    for role, rs in spec.roles.items():
        yield from _env_secrets(rs.env, rs.env_from, f"{role}.", spec.env, spec.env_from)


def _env_secrets(env: Mapping[str, Any], env_from: tuple, prefix: str, job_env: Mapping[str, Any],
                 job_env_from: tuple) -> Iterator[tuple[str, str]]:
    for name, value in env.items():
        if getattr(value, "source", None) == "secret_key_ref" and job_env.get(name) != value:
            yield f"{prefix}env.{name}.value_from.secret_key_ref.name", value.name
    own = env_from[len(job_env_from):] if prefix else env_from
    for i, item in enumerate(own):
        if item.source == "secret_ref":
            yield f"{prefix}env_from[{i}].secret_ref", item.name


def template_secrets(tpl: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    """(path, Secret name) for every Secret a pod template lets its pods read: volumes (secret, projected,
    CSI), every container's env and envFrom, sidecars and init containers included.

    Image pull secrets are not among them (:func:`template_pull_secrets`): the kubelet reads those to
    pull the image; no container sees them."""
    spec = tpl.get("spec") or {}
    for vol in spec.get("volumes") or ():
        vp = f"{prefix}.volumes[{vol.get('name')}]"
        if (vol.get("secret") or {}).get("secretName"):
            yield f"{vp}.secret.secretName", vol["secret"]["secretName"]
        for i, source in enumerate((vol.get("projected") or {}).get("sources") or ()):
            if (source.get("secret") or {}).get("name"):
                yield f"{vp}.projected.sources[{i}].secret.name", source["secret"]["name"]
        if ((vol.get("csi") or {}).get("nodePublishSecretRef") or {}).get("name"):
            yield f"{vp}.csi.nodePublishSecretRef.name", vol["csi"]["nodePublishSecretRef"]["name"]
    for kind in ("containers", "initContainers"):
        for c in spec.get(kind) or ():
            cp = f"{prefix}.{kind}[{c.get('name')}]"
            for e in c.get("env") or ():
                ref = (e.get("valueFrom") or {}).get("secretKeyRef") or {}
                if ref.get("name"):
                    yield f"{cp}.env[{e.get('name')}].valueFrom.secretKeyRef.name", ref["name"]
            for i, item in enumerate(c.get("envFrom") or ()):
                if (item.get("secretRef") or {}).get("name"):
                    yield f"{cp}.envFrom[{i}].secretRef.name", item["secretRef"]["name"]


def package_secret_problems(pods: Iterable[Mapping[str, Any]], labelled: Collection[str]) -> list[Problem]:
    """A Problem per Secret a pod would read that carries the package's own label (``labelled``: the names of the
    pods' namespace's Secrets labelled ``tfk8s.io/secret``, as the API server lists them). Refused whatever
    ``allowed_secrets`` says, ``*`` included: such a Secret is a staging task's HDFS delegation token."""
    out: list[Problem] = []
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name") or "?"
        out.extend(Problem(fld, f"Secret {secret} carries the label {LABEL_SECRET}: it is one of tfk8s-airflow's own "
                                "Secrets (a staging task's HDFS delegation token); no job may read one, whatever "
                                "[tfk8s] allowed_secrets says",
                           "name another Secret (the task's token is cancelled when its copy ends)")
                   for fld, secret in template_secrets(pod, f"pod {name}") if secret in labelled)
    return out


def template_pull_secrets(tpl: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    """(path, Secret name) for every image pull secret a pod template names."""
    for item in (tpl.get("spec") or {}).get("imagePullSecrets") or ():
        if item.get("name"):
            yield f"{prefix}.imagePullSecrets[{item['name']}]", item["name"]


def _restricted(sc: Mapping[str, Any], fld: str, admin: str, container: bool = False) -> list[Problem]:
    """What a restricted security context refuses in one (merged) pod or container securityContext."""
    out = selinux_problems(sc, fld, admin)
    fix = f"remove it, or {admin}"
    for k in ("seccompProfile", "appArmorProfile"):
        if (sc.get(k) or {}).get("type") == "Unconfined":
            out.append(Problem(f"{fld}.{k}.type", "the deployment's pods run confined", fix))
    if (sc.get("windowsOptions") or {}).get("hostProcess"):
        out.append(Problem(f"{fld}.windowsOptions.hostProcess", "the deployment's pods never run as host processes",
                           fix))
    if not container:
        return out
    if sc.get("privileged") is True:
        out.append(Problem(f"{fld}.privileged", "the deployment's containers are never privileged", fix))
    if sc.get("allowPrivilegeEscalation") is not False:
        out.append(Problem(f"{fld}.allowPrivilegeEscalation", "the deployment's containers never escalate privileges",
                           f"remove it (the default is false), or {admin}"))
    caps = sc.get("capabilities") or {}
    if caps.get("add"):
        out.append(Problem(f"{fld}.capabilities.add", "the deployment's containers run with every capability dropped",
                           fix))
    if "ALL" not in (caps.get("drop") or ()):
        out.append(Problem(f"{fld}.capabilities.drop", "must drop ALL capabilities, as the deployment's containers do",
                           f"remove it (the default is [ALL]), or {admin}"))
    if sc.get("procMount") not in (None, "Default"):
        out.append(Problem(f"{fld}.procMount", "the deployment's containers see the default /proc", fix))
    return out


def host_namespace_problems(spec: Mapping[str, Any], p: str, admin: str) -> list[Problem]:
    """A pod spec that shares the node's network, PID or IPC namespace (refused under
    ``restricted_security_context``)."""
    return [Problem(f"{p}.{k}", "the deployment's pods do not share the node's namespaces", f"remove it, or {admin}")
            for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]


def restricted_problems(sc: Mapping[str, Any], fld: str, admin: str, container: bool = False) -> list[Problem]:
    """What a restricted security context refuses in one pod or container securityContext."""
    return _restricted(sc, fld, admin, container)


def _under(path: str, roots: tuple[str, ...] | list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _allowed(name: str, allowed: tuple[str, ...]) -> bool:
    return ANY in allowed or name in allowed
