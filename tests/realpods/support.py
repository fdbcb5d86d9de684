"""What the real-pod tests share: the job watch with the node's container programs, and small readers
of what the reference trainer leaves in its model directory."""
from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from tests.podwatch import PodWatch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "dags"))
GOOD = 0.8  # Bayes accuracy of the synthetic data is ~0.91, chance 0.5
CLEANUP_TIMEOUT_S = 30


def report(name: str, seconds: float, **values) -> None:
    print(f"\n[realpods {name}] {seconds:.1f}s " + json.dumps(values, default=str), file=sys.stderr)


class JobWatch(PodWatch):
    """The namespace's pods (every incarnation, see :class:`tests.podwatch.PodWatch`) and the programs
    of their containers on the real node while a DAG runs; everything is gone after teardown, so the
    checks need the record."""

    def __init__(self, node, namespace: str):
        super().__init__(node.cluster.core_v1, namespace)
        self.node = node
        self.pids: set[int] = set()
        self.pids_by_container: dict[str, int] = {}  # "<pod>/<container>" -> pid of its program
        self._pid_thread = threading.Thread(target=self._watch_pids, daemon=True)

    def _watch_pids(self):
        while not self._stop.is_set():
            running = self.node.pids(self.namespace)
            self.pids.update(running.values())
            self.pids_by_container.update(running)
            self._stop.wait(0.3)

    def pod(self, hostname: str):
        """The newest incarnation of the replica with this hostname (``ps-0``)."""
        with self._lock:
            lives = [life for life in self.incarnations.values()
                     if life.pod is not None and life.pod.spec.hostname == hostname]
        return max(lives, key=lambda life: life.added).pod if lives else None

    def __enter__(self):
        super().__enter__()
        self._pid_thread.start()
        return self

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self._pid_thread.join(5)

    def assert_nothing_left(self):
        core, ns = self.core, self.namespace
        objects = ([f"pod/{p.metadata.name}" for p in core.list_namespaced_pod(ns).items]
                   + [f"service/{s.metadata.name}" for s in core.list_namespaced_service(ns).items]
                   + [f"configmap/{c.metadata.name}" for c in core.list_namespaced_config_map(ns).items
                      if c.metadata.name != "kube-root-ca.crt"])
        assert objects == [], objects
        assert self.incarnations, "no pod was seen"
        # Nothing runs (containers, sandboxes, programs); the ended records are the kubelet's to collect.
        self.node.assert_nothing_running(ns, sorted(self.pids), CLEANUP_TIMEOUT_S)


def run_dag(dag, namespace: str, **conf):
    return dag.test(run_conf={"namespace": namespace, **conf})



def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def checkpoint_step(model_dir: Path) -> int:
    """Step of the latest checkpoint, from the `checkpoint` index file (no TensorFlow here)."""
    try:
        text = (model_dir / "checkpoint").read_text()
    except FileNotFoundError:
        return 0
    for line in text.splitlines():
        if line.startswith("model_checkpoint_path:"):
            return int(line.split('"')[1].rsplit("-", 1)[1])
    return 0


def conf(dataset: dict, model_dir: Path, **extra) -> dict:
    return {"data_dir": dataset["dir"], "model_dir": str(model_dir), "shards": dataset["shards"], **extra}


def in_background(fn):
    """Run ``fn`` in a thread during dag.test(); re-raise its error afterwards."""
    box: dict = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()

    def result(timeout: float = 30):
        t.join(timeout)
        if "error" in box:
            raise box["error"]
        return box.get("result")
    return result
