"""Helpers of the end-to-end tests: publishing partitions and recording a namespace's objects."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]
E2E_MARKS = [pytest.mark.k8s, pytest.mark.hdfs, pytest.mark.gluster, pytest.mark.airflow, pytest.mark.tf]


def publish(env: dict[str, str], *dates: str) -> None:
    """``scripts/publish_dataset.py`` (idempotent: a partition with ``_SUCCESS`` is kept)."""
    res = subprocess.run([sys.executable, str(REPO_DIR / "scripts" / "publish_dataset.py"), *dates],
                         env=env, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        pytest.fail(f"publish_dataset.py {' '.join(dates)} failed:\n{res.stdout}\n{res.stderr[-3000:]}")


@dataclass
class Seen:
    kind: str
    name: str
    labels: dict[str, str]
    first: float
    last: float


@dataclass
class ObjectRecorder:
    """Polls a namespace's pods, services and ConfigMaps in the background.

    Keeps every object ever seen (they are gone after teardown) and, for each poll, the set
    of ``tfk8s.io/job`` labels whose pods existed at that moment.
    """

    core: Any
    namespace: str
    interval: float = 0.5
    objects: dict[tuple[str, str], Seen] = field(default_factory=dict)
    snapshots: list[tuple[float, frozenset[str]]] = field(default_factory=list)
    errors: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="object-recorder")

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            try:
                lists = {
                    "pod": self.core.list_namespaced_pod(self.namespace, _request_timeout=10).items,
                    "service": self.core.list_namespaced_service(self.namespace, _request_timeout=10).items,
                    "configmap": self.core.list_namespaced_config_map(self.namespace, _request_timeout=10).items,
                }
            except Exception:  # noqa: BLE001 - a slow API server must not kill the recorder
                self.errors += 1
                self._stop.wait(self.interval)
                continue
            for kind, items in lists.items():
                for obj in items:
                    labels = dict(obj.metadata.labels or {})
                    if "tfk8s.io/job" not in labels:
                        continue
                    key = (kind, obj.metadata.name)
                    seen = self.objects.get(key)
                    if seen is None:
                        self.objects[key] = Seen(kind, obj.metadata.name, labels, now, now)
                    else:
                        seen.last = now
            jobs = frozenset(p.metadata.labels["tfk8s.io/job"] for p in lists["pod"]
                             if p.metadata.labels and "tfk8s.io/job" in p.metadata.labels)
            self.snapshots.append((now, jobs))
            self._stop.wait(self.interval)

    def __enter__(self) -> ObjectRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(15)

    def of(self, kind: str) -> list[Seen]:
        return [s for s in self.objects.values() if s.kind == kind]

    def max_concurrent_jobs(self) -> tuple[int, frozenset[str]]:
        best = max(self.snapshots, key=lambda s: len(s[1]), default=(0.0, frozenset()))
        return len(best[1]), best[1]


def leftovers(core: Any, namespace: str) -> list[str]:
    sel = "tfk8s.io/job"
    return ([f"pod/{p.metadata.name}" for p in core.list_namespaced_pod(namespace, label_selector=sel).items]
            + [f"service/{s.metadata.name}" for s in core.list_namespaced_service(namespace, label_selector=sel).items]
            + [f"configmap/{c.metadata.name}"
               for c in core.list_namespaced_config_map(namespace, label_selector=sel).items])


def env_root(stack: Any) -> Path:
    return Path(stack.env["TFK8S_ROOT"])


def wait_gone(core: Any, namespace: str, timeout: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout
    left = leftovers(core, namespace)
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = leftovers(core, namespace)
    return left


def task_states(stack: Any, dag_id: str, run_id: str) -> dict[str, str]:
    return {f"{t['task_id']}[{t['map_index']}]" if t["map_index"] >= 0 else t["task_id"]: t["state"]
            for t in stack.task_instances(dag_id, run_id)}


__all__ = ["E2E_MARKS", "ObjectRecorder", "publish", "leftovers", "env_root", "wait_gone",
           "task_states"]
