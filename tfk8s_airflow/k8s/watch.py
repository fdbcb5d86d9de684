"""One LIST loop per job in the triggerer, shared by the job's sensor and all its replica tasks.

Why shared: a job of N replicas has N + 1 deferred tasks (one per replica, plus the sensor),
all waiting on the same pods. Each polling on its own would cost N + 1 LISTs per poll and
N + 1 judgements of the same pods. Here the first trigger of a job that subscribes starts
one loop for the job (per event loop: the triggerer's, or ``dag.test()``'s own per trigger);
every poll makes exactly one LIST request over one kept-open API connection, judges the pods
once (off the event loop, in a thread, so a 512-pod LIST never stalls other triggers) and
publishes the result to every subscriber. The loop ends with its last subscriber.

Transient API errors are published too (subscribers decide how many they tolerate);
permanent ones (403, 404 namespace) end the watch with that error.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from tfk8s_airflow.exceptions import KubernetesApiError, PermanentKubernetesApiError
from tfk8s_airflow.job.judge import JobPolicy, JobStatus, evaluate
from tfk8s_airflow.k8s.client import wrap_api_error

#: Consecutive failed polls after which the watch gives up (the API is unreachable).
MAX_CONSECUTIVE_ERRORS = 10
#: The API connection is reopened this often, so short-lived credentials (exec auth) refresh.
RECONNECT_S = 600.0
#: Parallel log reads per job when many replicas end at once.
LOG_CONCURRENCY = 8
#: The annotation KWOK manages its simulated nodes by: pods there do not really run.
SIMULATED_NODE_ANNOTATION = "kwok.x-k8s.io/node"


@dataclass(frozen=True)
class Snapshot:
    """One poll of a job: its judged status, or the error the LIST met."""

    seq: int
    at: float
    status: JobStatus | None
    error: KubernetesApiError | None = None
    permanent: bool = False
    pods: int = 0


@dataclass(frozen=True)
class BoundedLog:
    """A log read within a byte budget: all of it (``tail`` None), or its start and its end."""

    head: str
    tail: str | None = None


@dataclass(frozen=True)
class WatchKey:
    conn_id: str | None
    config_file: str | None
    namespace: str
    selector: str


def _judge(raw: bytes, policy: JobPolicy, now: float, watch_started: float) -> tuple[JobStatus, int]:
    items = json.loads(raw).get("items") or []
    return evaluate(items, policy, now, watch_started), len(items)


class JobWatch:
    """The shared LIST loop of one job. Use :func:`watch_job`, not the constructor."""

    def __init__(self, key: WatchKey, policy: Mapping[str, Any], watch_started: float, interval: float,
                 hook_factory: Callable[[], Any]) -> None:
        self.key = key
        self.policy = JobPolicy.from_dict(policy)
        self.watch_started = watch_started
        self.interval = interval
        self.subscribers = 0
        self.lists = 0  # LIST requests answered (tests and benchmarks read it)
        self.started = time.monotonic()
        self.max_gap = 0.0  # the longest time between two answered LISTs (event-loop stalls show here)
        self._last_answer: float | None = None
        self._hook_factory = hook_factory
        self._latest: Snapshot | None = None
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._api: Any = None
        self._log_slots = asyncio.Semaphore(LOG_CONCURRENCY)
        self._nodes: dict[str, dict[str, Any] | None] = {}

    # ------------------------------------------------------------------ subscribers
    async def next(self, after_seq: int = 0) -> Snapshot:
        """The first snapshot newer than ``after_seq`` (waits for the next poll)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._latest is not None and self._latest.seq > after_seq)
            assert self._latest is not None
            return self._latest

    async def snapshots(self) -> AsyncIterator[Snapshot]:
        """Every snapshot from now on (a slow subscriber skips to the newest)."""
        seq = 0
        while True:
            snap = await self.next(seq)
            seq = snap.seq
            yield snap
            if snap.permanent:
                return

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())

    async def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # ------------------------------------------------------------------ the loop
    async def _publish(self, snap: Snapshot) -> None:
        async with self._changed:
            self._latest = snap
            self._changed.notify_all()

    async def _run(self) -> None:
        from kubernetes_asyncio import client as async_client

        seq = self._latest.seq if self._latest else 0
        errors = 0
        while True:
            hook = self._hook_factory()
            opened = time.monotonic()
            async with hook.get_conn() as api:
                self._api = api
                v1 = async_client.CoreV1Api(api)
                while time.monotonic() - opened < RECONNECT_S:
                    t0 = time.monotonic()
                    seq += 1
                    try:
                        resp: Any = await v1.list_namespaced_pod(namespace=self.key.namespace,
                                                                 label_selector=self.key.selector,
                                                                 _preload_content=False)
                        raw = await resp.read()  # the raw response: judged in a thread, not parsed here
                        self.lists += 1
                        now = time.monotonic()
                        if self._last_answer is not None:
                            self.max_gap = max(self.max_gap, now - self._last_answer)
                        self._last_answer = now
                        status, count = await asyncio.to_thread(_judge, raw, self.policy, time.time(),
                                                                self.watch_started)
                        errors = 0
                        await self._publish(Snapshot(seq, time.time(), status, pods=count))
                    except async_client.ApiException as exc:
                        err = wrap_api_error(f"listing pods {self.key.selector} in {self.key.namespace}", exc)
                        errors += 1
                        permanent = isinstance(err, PermanentKubernetesApiError) or errors >= MAX_CONSECUTIVE_ERRORS
                        await self._publish(Snapshot(seq, time.time(), None, err, permanent))
                        if permanent:
                            return
                    except (TimeoutError, OSError, ValueError) as exc:
                        errors += 1
                        err = KubernetesApiError(f"listing pods {self.key.selector} in {self.key.namespace}",
                                                 None, f"{type(exc).__name__}: {exc}")
                        permanent = errors >= MAX_CONSECUTIVE_ERRORS
                        await self._publish(Snapshot(seq, time.time(), None, err, permanent))
                        if permanent:
                            return
                    await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - t0)))
            self._api = None

    def stats(self) -> str:
        """One line on the watch itself, for the sensor's log."""
        span = time.monotonic() - self.started
        return (f"{self.lists} LIST(s) of the job's pods in {span:.0f}s for {self.subscribers} task(s) "
                f"(poll {self.interval:g}s, longest gap {self.max_gap:.2f}s)")

    async def node(self, name: str) -> dict[str, Any] | None:
        """A node's metadata (cached: one GET per node per watch); None when it cannot be read
        (the deployment's RBAC need not allow reading nodes)."""
        if name in self._nodes:
            return self._nodes[name]
        from kubernetes_asyncio import client as async_client

        self._nodes[name] = None
        if self._api is None:
            return None
        try:
            resp: Any = await async_client.CoreV1Api(self._api).read_node(name, _preload_content=False)
            self._nodes[name] = json.loads(await resp.read()).get("metadata") or {}
        except (TimeoutError, async_client.ApiException, OSError, ValueError):
            pass
        return self._nodes[name]

    async def is_simulated(self, node: str) -> bool:
        meta = await self.node(node) or {}
        return (meta.get("annotations") or {}).get(SIMULATED_NODE_ANNOTATION) == "fake"

    # ------------------------------------------------------------------ logs
    async def read_log(self, pod: str, container: str, *, max_bytes: int, tail_lines: int = 5000,
                       previous: bool = False) -> BoundedLog:
        """A replica's log, bounded.

        The whole log when it fits in ``max_bytes``; otherwise its first half and its last
        ``tail_lines`` lines (capped to the other half). Two bounded requests at most; memory
        stays within about ``max_bytes``.
        """
        from kubernetes_asyncio import client as async_client

        async with self._log_slots:
            hook_conn = None
            api = self._api
            if api is None:  # the loop is between connections: use a short-lived one
                hook_conn = self._hook_factory().get_conn()
                api = await hook_conn.__aenter__()
            try:
                v1 = async_client.CoreV1Api(api)
                head = await self._read(v1, pod, container, previous, limit_bytes=max_bytes + 1)
                if len(head) <= max_bytes:
                    return BoundedLog(head.decode("utf-8", "replace"))
                half = max(max_bytes // 2, 1)
                tail = await self._read(v1, pod, container, previous, tail_lines=tail_lines, keep_last=half)
                first = head[:half]
                cut = first.rfind(b"\n")
                first = first[:cut + 1] if cut > 0 else first
                return BoundedLog(first.decode("utf-8", "replace"), tail.decode("utf-8", "replace"))
            finally:
                if hook_conn is not None:
                    await hook_conn.__aexit__(None, None, None)

    async def _read(self, v1: Any, pod: str, container: str, previous: bool, *, limit_bytes: int | None = None,
                    tail_lines: int | None = None, keep_last: int | None = None) -> bytes:
        from kubernetes_asyncio import client as async_client

        kwargs: dict[str, Any] = {"name": pod, "namespace": self.key.namespace, "container": container,
                                  "previous": previous, "_preload_content": False}
        if limit_bytes is not None:
            kwargs["limit_bytes"] = limit_bytes
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        try:
            resp = await v1.read_namespaced_pod_log(**kwargs)
        except async_client.ApiException as exc:
            raise wrap_api_error(f"reading the log of {self.key.namespace}/{pod} ({container})", exc) from exc
        buf = bytearray()
        async for chunk in resp.content.iter_chunked(1 << 16):
            buf += chunk
            if keep_last is not None and len(buf) > 2 * keep_last:
                del buf[:len(buf) - keep_last]
            if limit_bytes is not None and len(buf) >= limit_bytes:
                break
        resp.release()
        if keep_last is not None and len(buf) > keep_last:
            del buf[:len(buf) - keep_last]
            cut = buf.find(b"\n")
            if 0 <= cut < len(buf) - 1:
                del buf[:cut + 1]
        return bytes(buf)


_WATCHES: dict[tuple[int, WatchKey], JobWatch] = {}


def _default_hook_factory(conn_id: str | None, config_file: str | None) -> Callable[[], Any]:
    def make() -> Any:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook

        return AsyncKubernetesHook(conn_id=conn_id, config_file=config_file)
    return make


@asynccontextmanager
async def watch_job(*, namespace: str, selector: str, policy: Mapping[str, Any], watch_started: float,
                    interval: float, conn_id: str | None = "kubernetes_default", config_file: str | None = None,
                    hook_factory: Callable[[], Any] | None = None) -> AsyncIterator[JobWatch]:
    """Subscribe to the job's shared watch (started by the first subscriber of this event loop)."""
    key = WatchKey(conn_id, config_file, namespace, selector)
    loop_key = (id(asyncio.get_running_loop()), key)
    watch = _WATCHES.get(loop_key)
    if watch is None:
        watch = JobWatch(key, policy, watch_started, interval,
                         hook_factory or _default_hook_factory(conn_id, config_file))
        _WATCHES[loop_key] = watch
    watch.interval = min(watch.interval, interval)
    watch.subscribers += 1
    watch._start()
    try:
        yield watch
    finally:
        watch.subscribers -= 1
        if watch.subscribers <= 0:
            _WATCHES.pop(loop_key, None)
            await watch._stop()
