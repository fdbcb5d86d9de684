"""Helpers for code that runs inside a training pod: who am I, what is my data, are my peers up.

Why this module exists and how it is shaped:

* It runs in the training image, which has TensorFlow but usually not Airflow, and it must
  also work in an image without TensorFlow (a data-prep or evaluator container). So it
  imports only the standard library and :mod:`tfk8s_airflow.exceptions`; the one helper
  that builds a TensorFlow object (:func:`tf1_session_config`) imports TensorFlow lazily.
* ``TF_CONFIG`` is read exactly as Kubeflow's TFJob writes it
  (``{"cluster": ..., "task": {"type", "index"}, "environment": "cloud"}``) so a program
  written for TFJob and a program written against this module see the same job. Older
  programs use ``--ps_hosts/--worker_hosts/--job_name/--task_index``;
  :func:`parse_legacy_flags` turns those into the same :class:`TFConfig`.
* Start-up races were the most common TFJob complaint (a worker crashing because a peer's
  DNS name did not resolve yet). :func:`wait_for_peers` resolves and TCP-connects every
  peer with a bounded, backed-off wait and says, per missing peer, whether DNS or the
  connect failed. Call it *after* starting this replica's own server: if every replica
  waited for every port before listening, nobody would ever listen.
* Exit codes follow TFJob's ``ExitCode`` restart policy: 1-127 permanent, >= 128
  retryable. :func:`exit_code_for` maps our exception classes (and TensorFlow's transient
  errors, recognised by name so TensorFlow need not be imported) onto those two codes, so
  the pod's restart policy and the job sensor can tell "fix your input" from "try again".
* Every reader takes an optional ``env`` mapping (default ``os.environ``) so it is testable
  without touching the process environment.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfk8s_airflow.contract import (
    DATA_DIR_ENV,
    DEFAULT_SHARDS_FILE,
    EXIT_PERMANENT,
    EXIT_RETRYABLE,
    EXIT_SUCCESS,
    INDEX_ENV,
    JOB_NAME_ENV,
    LOG_DIR_ENV,
    MODEL_DIR_ENV,
    PROGRESS_PREFIX,
    ROLE_ENV,
    SHARD_FILES_ENV,
    SHARDS_FILE_ENV,
    TF_CONFIG_ENV,
    is_retryable_exit,
)
from tfk8s_airflow.exceptions import (
    PeerTimeoutError,
    PermanentError,
    RuntimeConfigError,
    TFK8sError,
)

log = logging.getLogger("tfk8s_airflow.pod.runtime")


#: Roles whose task 0 leads the job, in order of precedence ("master" is TFJob's old name).
CHIEF_ROLES = ("chief", "master")


# TensorFlow errors that mean "a peer or the network went away", by class name.
_TRANSIENT_TF_ERRORS = frozenset(
    {"UnavailableError", "AbortedError", "DeadlineExceededError", "CancelledError"}
)


# --------------------------------------------------------------------------- TF_CONFIG


@dataclass(frozen=True)
class TFConfig:
    """One replica's view of its job: the cluster and which task this replica is."""

    cluster: dict[str, list[str]]
    task_type: str
    task_index: int
    environment: str = "cloud"

    @property
    def address(self) -> str | None:
        """This task's own ``host:port`` (None for an evaluator hidden from the cluster)."""
        hosts = self.cluster.get(self.task_type, [])
        return hosts[self.task_index] if self.task_index < len(hosts) else None

    @property
    def task_key(self) -> str:
        """``<role>-<index>``, the key of this replica in the shards file and pod names."""
        return f"{self.task_type}-{self.task_index}"

    @property
    def chief_task(self) -> tuple[str, int]:
        """The task that leads the job: the chief (or master) if any, else worker 0."""
        for role in CHIEF_ROLES:
            if self.cluster.get(role):
                return role, 0
        return "worker", 0

    @property
    def is_chief(self) -> bool:
        return (self.task_type, self.task_index) == self.chief_task

    def num_tasks(self, role: str) -> int:
        return len(self.cluster.get(role, []))

    def peers(
        self,
        roles: Iterable[str] | None = None,
        exclude_roles: Iterable[str] = (),
        include_self: bool = False,
    ) -> dict[str, str]:
        """``{"<role>-<i>": "host:port"}`` of the other tasks, optionally filtered by role."""
        wanted = set(roles) if roles is not None else None
        excluded = set(exclude_roles)
        out: dict[str, str] = {}
        for role in sorted(self.cluster):
            if role in excluded or (wanted is not None and role not in wanted):
                continue
            for i, addr in enumerate(self.cluster[role]):
                if not include_self and (role, i) == (self.task_type, self.task_index):
                    continue
                out[f"{role}-{i}"] = addr
        return out

    def training_cluster(self) -> dict[str, list[str]]:
        """The cluster without the evaluator: a TF server or PS coordinator must not see it
        (an evaluator in a ParameterServerStrategy cluster hangs the coordinator)."""
        return {r: list(h) for r, h in self.cluster.items() if r != "evaluator" and h}

    def to_json(self) -> str:
        """The ``TF_CONFIG`` value describing this task (TFJob's layout)."""
        return json.dumps(
            {
                "cluster": self.cluster,
                "task": {"type": self.task_type, "index": self.task_index},
                "environment": self.environment,
            },
            sort_keys=True,
        )


def split_host_port(address: str, default_port: int | None = None) -> tuple[str, int]:
    """``"h:2222"`` / ``"[::1]:2222"`` -> (host, port); RuntimeConfigError if malformed."""
    addr = address.strip()
    host, port_text = addr, ""
    if addr.startswith("["):
        end = addr.find("]")
        if end < 0:
            raise RuntimeConfigError(f"bad peer address {address!r}: unclosed '['")
        host, rest = addr[1:end], addr[end + 1 :]
        if rest.startswith(":"):
            port_text = rest[1:]
        elif rest:
            raise RuntimeConfigError(f"bad peer address {address!r}")
    elif addr.count(":") == 1:
        host, port_text = addr.split(":")
    if not port_text:
        if default_port is None:
            raise RuntimeConfigError(f"peer address {address!r} has no port (want host:port)")
        return host, default_port
    try:
        port = int(port_text)
    except ValueError:
        raise RuntimeConfigError(f"peer address {address!r} has a non-numeric port") from None
    if not host or not 0 < port < 65536:
        raise RuntimeConfigError(f"bad peer address {address!r} (want host:port)")
    return host, port


def _validate_cluster(cluster: Any, source: str) -> dict[str, list[str]]:
    if not isinstance(cluster, dict) or not cluster:
        raise RuntimeConfigError(f"{source}: 'cluster' must be a non-empty object of role -> hosts")
    out: dict[str, list[str]] = {}
    for role, hosts in cluster.items():
        if isinstance(hosts, str):
            hosts = [h for h in hosts.split(",") if h]
        if not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts):
            raise RuntimeConfigError(f"{source}: cluster.{role} must be a list of 'host:port' strings")
        for h in hosts:
            try:
                split_host_port(h)
            except RuntimeConfigError as exc:
                raise RuntimeConfigError(f"{source}: cluster.{role}: {exc}") from None
        out[str(role)] = list(hosts)
    return out


def _make_config(cluster: dict[str, list[str]], task_type: Any, task_index: Any,
                 environment: str, source: str) -> TFConfig:
    if not isinstance(task_type, str) or not task_type:
        raise RuntimeConfigError(f"{source}: task type missing (e.g. 'worker', 'ps', 'chief')")
    try:
        index = int(task_index)
    except (TypeError, ValueError):
        raise RuntimeConfigError(f"{source}: task index {task_index!r} is not an integer") from None
    if index < 0:
        raise RuntimeConfigError(f"{source}: task index {index} is negative")
    # An evaluator may be hidden from the cluster (it is not part of training).
    if task_type != "evaluator":
        if task_type not in cluster:
            raise RuntimeConfigError(
                f"{source}: task type {task_type!r} is not in the cluster {sorted(cluster)}"
            )
        if index >= len(cluster[task_type]):
            raise RuntimeConfigError(
                f"{source}: task index {index} out of range: cluster has "
                f"{len(cluster[task_type])} {task_type} task(s)"
            )
    return TFConfig(cluster, task_type, index, environment)


def parse_tf_config(text: str, source: str = TF_CONFIG_ENV) -> TFConfig:
    """Parse and validate a ``TF_CONFIG`` JSON document."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RuntimeConfigError(f"{source} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RuntimeConfigError(f"{source} must be a JSON object with 'cluster' and 'task'")
    cluster = _validate_cluster(doc.get("cluster"), source)
    task = doc.get("task")
    if not isinstance(task, dict):
        raise RuntimeConfigError(f"{source}: 'task' must be an object with 'type' and 'index'")
    return _make_config(cluster, task.get("type"), task.get("index", 0),
                        str(doc.get("environment", "cloud")), source)


def tf_config(env: Mapping[str, str] | None = None) -> TFConfig:
    """This replica's TFConfig from the ``TF_CONFIG`` environment variable."""
    env = os.environ if env is None else env
    text = env.get(TF_CONFIG_ENV)
    if not text:
        raise RuntimeConfigError(
            f"{TF_CONFIG_ENV} is not set: this program must run as a replica of a TF job "
            "(or pass --ps_hosts/--worker_hosts/--job_name/--task_index)"
        )
    return parse_tf_config(text)


def legacy_flags_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the classic distributed-TF flags to ``parser`` (or a new one)."""
    p = parser or argparse.ArgumentParser(add_help=False)
    p.add_argument("--ps_hosts", "--ps-hosts", dest="ps_hosts", default="")
    p.add_argument("--worker_hosts", "--worker-hosts", dest="worker_hosts", default="")
    p.add_argument("--chief_hosts", "--chief-hosts", dest="chief_hosts", default="")
    p.add_argument("--job_name", "--job-name", dest="job_name", default="")
    p.add_argument("--task_index", "--task-index", dest="task_index", default="0")
    return p


def parse_legacy_flags(argv: Sequence[str]) -> tuple[TFConfig, list[str]]:
    """``--ps_hosts a,b --worker_hosts c,d --job_name worker --task_index 1`` -> TFConfig.

    Returns the config and the arguments it did not consume.
    """
    ns, rest = legacy_flags_parser().parse_known_args(list(argv))
    if not ns.job_name:
        raise RuntimeConfigError("legacy flags: --job_name is required (ps, worker or chief)")
    cluster = {
        role: [h.strip() for h in text.split(",") if h.strip()]
        for role, text in (("chief", ns.chief_hosts), ("ps", ns.ps_hosts),
                           ("worker", ns.worker_hosts))
    }
    cluster = {r: h for r, h in cluster.items() if h}
    if not cluster:
        raise RuntimeConfigError("legacy flags: --ps_hosts/--worker_hosts give no hosts")
    cluster = _validate_cluster(cluster, "legacy flags")
    return _make_config(cluster, ns.job_name, ns.task_index, "cloud", "legacy flags"), rest


def load_config(argv: Sequence[str] | None = None,
                env: Mapping[str, str] | None = None) -> TFConfig:
    """``TF_CONFIG`` if set, else the legacy flags in ``argv`` (default ``sys.argv[1:]``)."""
    env = os.environ if env is None else env
    if env.get(TF_CONFIG_ENV):
        return tf_config(env)
    argv = sys.argv[1:] if argv is None else argv
    if any(a.split("=")[0] in ("--job_name", "--job-name") for a in argv):
        return parse_legacy_flags(argv)[0]
    return tf_config(env)  # raises the "not set" error


# --------------------------------------------------------------------------- pod environment


@dataclass(frozen=True)
class PodEnv:
    """The ``TFK8S_*`` variables our pods carry (None when unset)."""

    job_name: str | None = None
    role: str | None = None
    index: int | None = None
    data_dir: str | None = None
    model_dir: str | None = None
    log_dir: str | None = None


def pod_env(env: Mapping[str, str] | None = None) -> PodEnv:
    env = os.environ if env is None else env
    index_text = env.get(INDEX_ENV)
    try:
        index = int(index_text) if index_text not in (None, "") else None
    except ValueError:
        raise RuntimeConfigError(f"{INDEX_ENV}={index_text!r} is not an integer") from None
    return PodEnv(
        job_name=env.get(JOB_NAME_ENV) or None,
        role=env.get(ROLE_ENV) or None,
        index=index,
        data_dir=env.get(DATA_DIR_ENV) or None,
        model_dir=env.get(MODEL_DIR_ENV) or None,
        log_dir=env.get(LOG_DIR_ENV) or None,
    )


# --------------------------------------------------------------------------- shards


def _task_key(env: Mapping[str, str], config: TFConfig | None) -> str:
    if config is not None:
        return config.task_key
    if env.get(TF_CONFIG_ENV):
        return tf_config(env).task_key
    pe = pod_env(env)
    if pe.role and pe.index is not None:
        return f"{pe.role}-{pe.index}"
    raise RuntimeConfigError(
        f"cannot tell which replica this is: set {TF_CONFIG_ENV} or {ROLE_ENV}/{INDEX_ENV}"
    )


def _file_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RuntimeConfigError(f"{where} must be a JSON list of file paths")
    return list(value)


def all_shards(env: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """The whole ``{"<role>-<i>": [paths]}`` assignment from the shards file."""
    env = os.environ if env is None else env
    path = env.get(SHARDS_FILE_ENV) or DEFAULT_SHARDS_FILE
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise RuntimeConfigError(
            f"shard assignment not found: {path} does not exist (set {SHARD_FILES_ENV} to a "
            f"JSON list, or {SHARDS_FILE_ENV} to the mounted shards.json)"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise RuntimeConfigError(f"cannot read shard assignment {path} ({SHARDS_FILE_ENV}): {exc}") from None
    if not isinstance(doc, dict):
        raise RuntimeConfigError(f"{path} ({SHARDS_FILE_ENV}) must be a JSON object of '<role>-<i>' -> files")
    return {str(k): _file_list(v, f"{path} key {k!r}") for k, v in doc.items()}


def my_shard(env: Mapping[str, str] | None = None, config: TFConfig | None = None) -> list[str]:
    """This replica's data files: ``TFK8S_SHARD_FILES`` (JSON list) if set, else its entry
    (``<role>-<index>``) in the shards file (``TFK8S_SHARDS_FILE``, default the ConfigMap mount)."""
    env = os.environ if env is None else env
    direct = env.get(SHARD_FILES_ENV)
    if direct:
        try:
            value = json.loads(direct)
        except json.JSONDecodeError as exc:
            raise RuntimeConfigError(f"{SHARD_FILES_ENV} is not valid JSON: {exc}") from None
        return _file_list(value, SHARD_FILES_ENV)
    key = _task_key(env, config)
    shards = all_shards(env)
    if key not in shards:
        path = env.get(SHARDS_FILE_ENV) or DEFAULT_SHARDS_FILE
        raise RuntimeConfigError(
            f"no shard for {key!r} in {path} ({SHARDS_FILE_ENV}); it has {sorted(shards)}"
        )
    return shards[key]


# --------------------------------------------------------------------------- peers


def _resolve(host: str, port: int, timeout_s: float) -> list[tuple]:
    """getaddrinfo bounded by ``timeout_s`` (the libc call itself has no timeout)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["v"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["e"] = exc

    t = threading.Thread(target=run, name=f"resolve-{host}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise TimeoutError(f"DNS lookup took longer than {timeout_s:.1f}s")
    if "e" in box:
        raise box["e"]
    return box["v"]


def probe_peer(address: str, timeout_s: float = 2.0) -> tuple[str, str] | None:
    """None when ``address`` resolves and accepts a TCP connection, else (stage, detail)
    where stage is ``"dns"`` or ``"connect"``."""
    host, port = split_host_port(address)
    try:
        infos = _resolve(host, port, timeout_s)
    except (OSError, UnicodeError) as exc:
        return "dns", f"{host} does not resolve ({exc})"
    errors = []
    for family, socktype, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, socktype, proto) as s:
                s.settimeout(timeout_s)
                s.connect(sockaddr)
                return None
        except OSError as exc:
            errors.append(f"{sockaddr[0]}:{sockaddr[1]}: {exc}")
    return "connect", f"{host} resolves but port {port} refuses: " + "; ".join(errors or ["no address"])


@dataclass
class PeerWait:
    """What :func:`wait_for_peers` saw: peers reached and how long it took."""

    reached: dict[str, str] = field(default_factory=dict)
    elapsed_s: float = 0.0
    attempts: int = 0


def wait_for_peers(
    timeout_s: float,
    config: TFConfig | None = None,
    *,
    roles: Iterable[str] | None = None,
    exclude_roles: Iterable[str] = ("evaluator",),
    include_self: bool = False,
    connect: bool = True,
    attempt_timeout_s: float = 2.0,
    initial_backoff_s: float = 0.2,
    max_backoff_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> PeerWait:
    """Wait until every peer's DNS name resolves and (``connect=True``) its port accepts.

    ``roles`` limits the wait to those roles; ``exclude_roles`` drops roles (a PS waits for
    nobody, a TF1 worker only for the PS, a chief not for the evaluator). Raises
    :class:`PeerTimeoutError` after ``timeout_s`` naming each missing peer and whether DNS
    or the TCP connect failed.
    """
    config = config or tf_config()
    pending = config.peers(roles=roles, exclude_roles=exclude_roles, include_self=include_self)
    result = PeerWait()
    start = time.monotonic()
    deadline = start + max(0.0, timeout_s)
    backoff = initial_backoff_s
    failures: dict[str, tuple[str, str]] = {}
    log.info("waiting up to %.0fs for %d peer(s): %s", timeout_s, len(pending), ", ".join(pending))
    while pending:
        result.attempts += 1
        for key, addr in list(pending.items()):
            left = deadline - time.monotonic()
            problem = probe_peer(addr, max(0.05, min(attempt_timeout_s, left)) if left > 0 else 0.05)
            if problem is None:
                result.reached[key] = pending.pop(key)
                failures.pop(key, None)
            else:
                failures[key] = problem
        if not pending:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            detail = "; ".join(
                f"{k} ({pending[k]}): {stage} failed: {msg}"
                for k, (stage, msg) in sorted(failures.items())
            )
            raise PeerTimeoutError(
                f"{config.task_key}: peer(s) not reachable after {timeout_s:.1f}s: {detail}"
            )
        sleep(min(left, backoff * (0.75 + random.random() / 2)))
        backoff = min(max_backoff_s, backoff * 2)
    result.elapsed_s = time.monotonic() - start
    log.info("all peers reachable after %.1fs", result.elapsed_s)
    return result


# --------------------------------------------------------------------------- TF1 sessions


def device_filters(task_type: str, index: int) -> list[str]:
    """Devices a TF1 session of this task may see.

    A worker (or chief) sees every PS and only itself, so its session never waits for
    another worker: without filters, a worker that (re)starts after worker 0 has finished
    hangs forever creating its session.
    """
    if task_type == "ps":
        return [f"/job:ps/task:{index}"]
    if task_type == "evaluator":
        return [f"/job:evaluator/task:{index}"]
    return ["/job:ps", f"/job:{task_type}/task:{index}"]


def tf1_session_config(task_type: str, index: int, **kwargs: Any) -> Any:
    """A ``tf.compat.v1.ConfigProto`` with :func:`device_filters` (imports TensorFlow)."""
    import tensorflow as tf  # noqa: PLC0415 - optional dependency, imported on use

    return tf.compat.v1.ConfigProto(device_filters=device_filters(task_type, index), **kwargs)


# --------------------------------------------------------------------------- exit codes



def exit_code_for(exc: BaseException | None) -> int:
    """Map an exception (None = success) to the exit code the pod should end with."""
    if exc is None:
        return EXIT_SUCCESS
    if isinstance(exc, SystemExit):
        code = exc.code
        return code if isinstance(code, int) else (EXIT_SUCCESS if code is None else EXIT_PERMANENT)
    if isinstance(exc, PermanentError):
        return EXIT_PERMANENT
    if isinstance(exc, (PeerTimeoutError, ConnectionError, TimeoutError, KeyboardInterrupt)):
        return EXIT_RETRYABLE
    if any(cls.__name__ in _TRANSIENT_TF_ERRORS for cls in type(exc).__mro__):
        return EXIT_RETRYABLE
    if isinstance(exc, MemoryError):
        return EXIT_RETRYABLE
    return EXIT_PERMANENT


def run_main(main: Callable[[], Any]) -> int:
    """Run ``main()``, log any error with its classification, return the exit code."""
    try:
        main()
    except BaseException as exc:  # noqa: BLE001 - every ending becomes an exit code
        code = exit_code_for(exc)
        if not isinstance(exc, SystemExit):
            kind = "retryable" if is_retryable_exit(code) else "permanent"
            if not isinstance(exc, TFK8sError):  # ours say what is wrong; others need a trace
                traceback.print_exc()
            print(f"tfk8s: {kind} failure ({type(exc).__name__}: {exc}); exit code {code}",
                  file=sys.stderr, flush=True)
        return code
    return EXIT_SUCCESS


# --------------------------------------------------------------------------- progress


def report(step: int, *, loss: float | None = None, examples_per_sec: float | None = None,
           target_step: int | None = None, stream: Any = None) -> str:
    """Tell Airflow how far training is: one structured line on stdout.

    ``runtime.report(step=global_step, loss=loss, target_step=2000)`` prints
    ``tfk8s.progress {"step": 1200, "loss": 0.31, "target_step": 2000}``. The job sensor reads the
    newest such line of the lead replica (the chief, else worker 0) from its log each poll and
    shows the step, loss, rate and an ETA in the sensor's log and the TF jobs view; with
    ``progress_timeout`` in the spec, a job whose step stops growing fails as ``stalled``. Any
    program can print the line itself; non-finite numbers are left out. Returns the line.
    """
    doc: dict[str, Any] = {"step": int(step)}
    for key, value in (("loss", loss), ("examples_per_sec", examples_per_sec)):
        if value is not None and value == value and abs(float(value)) != float("inf"):
            doc[key] = round(float(value), 6)
    if target_step is not None:
        doc["target_step"] = int(target_step)
    line = PROGRESS_PREFIX + json.dumps(doc, separators=(",", ":"))
    out = stream if stream is not None else sys.stdout
    print(line, file=out, flush=True)
    return line

