"""The pre-flight verdict's time on synthetic clusters (target: < 1 s for 1,000 nodes and 512 replicas).

What setup adds before it creates a job, besides its two LISTs: reading the API's JSON of the
nodes and the bound pods, and the packing. Cases side by side in one run, best of N (the
machine is shared): a cluster with room (``runs now``), one whose GPUs are taken (``waits``,
which also packs onto the empty nodes for its hint), one no node can ever hold (``never``),
and the 1,000 nodes parsed from JSON with 10,000 bound pods. Prints JSON lines.
Run: .venv/bin/python benchmarks/preflight.py
"""

from __future__ import annotations

import json
import time
from typing import Any

from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas, pod_manifest
from tfk8s_airflow.job.policy.preflight import bound_usage, judge, node_from_api, pod_demand
from tfk8s_airflow.job.spec import parse_spec

TARGET_S = 1.0


def best(fn: Any, repeat: int = 5) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def api_node(i: int, gpu: int) -> dict[str, Any]:
    alloc = {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpu), "ephemeral-storage": "1Ti"}
    return {"metadata": {"name": f"node-{i:04d}", "labels": {"pool": f"p{i % 4}", "kubernetes.io/hostname": f"n{i}"}},
            "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}] if gpu else []},
            "status": {"allocatable": alloc, "capacity": alloc, "conditions": [{"type": "Ready", "status": "True"}]}}


def bound_pod(i: int, node: str, gpu: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpu)} if gpu else {}
    return {"metadata": {"name": f"other-{i}", "labels": {"app": "other"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "500m", "memory": "1Gi"}, "limits": limits}}]},
            "status": {"phase": "Running"}}


def main() -> None:
    raw = {"name": "bench", "image": "tfk8s/trainer:0.1", "tolerations": [{"key": "gpu", "operator": "Exists"}],
           "ps": {"replicas": 32, "resources": {"cpu": "4", "memory": "16Gi"}},
           "worker": {"replicas": 480, "resources": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 2}}}
    spec = parse_spec(raw)
    names = JobNames.for_run(spec, "manual__1", dag_id="bench")
    pods = [pod_demand(pod_manifest(spec, names, r)) for r in plan_replicas(spec, names)]
    api_nodes = [api_node(i, gpu=8 if i % 2 else 0) for i in range(1000)]
    nodes = [node_from_api(n) for n in api_nodes]
    half = {n.name: {"nvidia.com/gpu": 7000} for n in nodes[1::2]}  # 1 GPU free per GPU node: 500 < 960
    huge = parse_spec({**raw, "worker": {**raw["worker"], "resources": {"nvidia.com/gpu": 16}}})
    huge_pods = [pod_demand(pod_manifest(huge, names, r)) for r in plan_replicas(huge, names)]
    others = [bound_pod(i, f"node-{i % 1000:04d}", 1 if i % 2 and i < 2000 else 0) for i in range(10_000)]
    cases = {
        "runs now": lambda: judge(nodes, {}, pods),
        "waits": lambda: judge(nodes, half, pods),
        "never": lambda: judge(nodes, {}, huge_pods),
        "runs now, from JSON with 10,000 bound pods": lambda: judge(
            [node_from_api(n) for n in api_nodes], bound_usage(others), pods),
    }
    for case, fn in cases.items():
        seconds, verdict = best(fn)
        print(json.dumps({"case": case, "nodes": len(nodes), "replicas": len(pods), "verdict": verdict.verdict,
                          "seconds": round(seconds, 4), "target_s": TARGET_S, "reason": verdict.reason[:160]}))


if __name__ == "__main__":
    main()
