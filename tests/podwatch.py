"""Watching a namespace's pods while a job runs: the tests' one pod recorder.

Pods are gone after teardown, so a test records them as they live: a WATCH of the namespace
(not polling, so no state between two polls is missed) in a background thread. Per pod it
keeps the newest object and a timeline: when it was added (and whether it was gated by
scheduling gates then), when its gates were first seen gone, when it was bound to a node,
each phase it reached, and when it was deleted. Times are this process's ``time.monotonic()``
at the event's arrival: they order events, they are not the API server's timestamps.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PodLife:
    name: str
    added: float
    gated_when_added: bool
    ungated: float | None = None
    bound: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    deleted: float | None = None
    pod: Any = None

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.pod.metadata.labels or {})

    @property
    def key(self) -> str:
        return f"{self.labels.get('tfk8s.io/role')}-{self.labels.get('tfk8s.io/index')}"

    @property
    def attempt(self) -> int:
        """The job attempt this pod belongs to (recovery labels the pods it recreates)."""
        return int(self.labels.get("tfk8s.io/attempt", "1"))


class PodWatch:
    """``with PodWatch(core, ns) as w: ...``; then ``w.pods`` (name -> newest V1Pod) and ``w.lives``.

    ``lives`` holds the newest incarnation of each pod name; ``incarnations`` every pod (by UID),
    so a pod that recovery deleted and recreated under the same name shows twice there.
    """

    def __init__(self, core: Any, namespace: str, label_selector: str | None = None):
        self.core, self.namespace, self.selector = core, namespace, label_selector
        self.lives: dict[str, PodLife] = {}
        self.incarnations: dict[str, PodLife] = {}
        self.max_live = 0
        self.errors = 0
        self._live: set[str] = set()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"podwatch-{namespace}")

    @property
    def pods(self) -> dict[str, Any]:
        with self._lock:
            return {name: life.pod for name, life in self.lives.items()}

    def _record(self, kind: str, pod: Any) -> None:
        now = time.monotonic()
        name, uid = pod.metadata.name, pod.metadata.uid
        with self._lock:
            life = self.incarnations.get(uid)
            if life is None:
                life = self.incarnations[uid] = PodLife(name, now, bool(pod.spec.scheduling_gates))
                self.lives[name] = life
            life.pod = pod
            if life.ungated is None and not pod.spec.scheduling_gates:
                life.ungated = now
            if life.bound is None and pod.spec.node_name:
                life.bound = now
            phase = pod.status.phase if pod.status else None
            if phase and phase not in life.phases:
                life.phases[phase] = now
            if kind == "DELETED":
                life.deleted = now
                self._live.discard(name)
            else:
                self._live.add(name)
            self.max_live = max(self.max_live, len(self._live))

    def _run(self) -> None:
        from kubernetes import watch

        version = None
        while not self._stop.is_set():
            try:
                listing = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector)
                for pod in listing.items:
                    self._record("ADDED", pod)
                version = listing.metadata.resource_version
                self._ready.set()
                stream = watch.Watch().stream(self.core.list_namespaced_pod, self.namespace,
                                              label_selector=self.selector, resource_version=version,
                                              timeout_seconds=5, _request_timeout=10)
                for event in stream:
                    self._record(event["type"], event["object"])
                    if self._stop.is_set():
                        break
            except Exception:  # noqa: BLE001 - a namespace being deleted, an expired version: list again
                self.errors += 1
                self._ready.set()
                self._stop.wait(0.2)

    def __enter__(self) -> PodWatch:
        self._thread.start()
        self._ready.wait(30)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(15)

    def of_job(self, job: str) -> list[PodLife]:
        return [life for life in self.lives.values() if life.labels.get("tfk8s.io/job") == job]

    def history(self, key: str) -> list[PodLife]:
        """Every incarnation of one replica (``worker-1``), oldest first."""
        with self._lock:
            lives = [life for life in self.incarnations.values() if life.pod is not None and life.key == key]
        return sorted(lives, key=lambda life: life.added)

    def wait_for(self, predicate: Any, timeout: float = 120.0, what: str = "a pod") -> PodLife:
        """The first incarnation for which ``predicate(life)`` holds, waiting for it as events arrive."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                hit = next((life for life in self.incarnations.values() if life.pod is not None and predicate(life)),
                           None)
            if hit is not None:
                return hit
            time.sleep(0.1)
        raise TimeoutError(f"no {what} within {timeout:.0f}s")
