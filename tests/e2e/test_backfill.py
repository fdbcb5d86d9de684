"""A backfill of ``tfk8s_retrain_daily`` over three logical dates, two runs at a time.

Real services (scheduler with LocalExecutor, triggerer, DAG processor, API server) on
PostgreSQL; real TensorFlow PS/worker jobs on the devstack's real node; partitions on HDFS, cache,
models and serving on GlusterFS (a fresh ``TFK8S_ROOT``). Checks: every run succeeded on its
own partition; two jobs ran at the same time; no object (pod, Service, ConfigMap, run label)
is shared between runs; only improving models were promoted and ``serving/current.json`` is
the best one; nothing of the jobs is left in the cluster.
"""
from __future__ import annotations

import json
import signal
import time
from collections import defaultdict
from datetime import datetime

import pytest

from tests.e2e._support import E2E_MARKS, ObjectRecorder, env_root, leftovers, publish, task_states, wait_gone
from tests.fixtures.waiting import wait_until

pytestmark = [*E2E_MARKS, pytest.mark.timeout(1800)]

DAG_ID = "tfk8s_retrain_daily"
DATES = ["2026-02-01", "2026-02-02", "2026-02-03"]
BACKFILL_TIMEOUT_S = 900


def _ts(value: str | None) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else float("nan")


def test_backfill_three_dates_two_at_a_time(airflow_stack, k8s_cluster, k8s_namespace):
    stack, core = airflow_stack, k8s_cluster.core_v1
    root = env_root(stack)
    publish(stack.env, *DATES)
    assert not (root / "serving" / "current.json").exists()
    conf = {"namespace": k8s_namespace, "steps": 200}

    t0 = time.monotonic()
    with ObjectRecorder(core, k8s_namespace) as rec:
        res = stack.cli("backfill", "create", "--dag-id", DAG_ID, "--from-date", DATES[0], "--to-date", DATES[-1],
                        "--reprocess-behavior", "completed", "--max-active-runs", "2",
                        "--dag-run-conf", json.dumps(conf))
        print(res.stdout[-2000:])
        runs = stack.wait_for_runs(DAG_ID, count=len(DATES), timeout=BACKFILL_TIMEOUT_S)
    wall = time.monotonic() - t0
    mem = stack.memory_mib()

    runs = [r for r in runs if r["run_type"] == "backfill"]
    by_date = {r["logical_date"][:10]: r for r in runs}
    assert sorted(by_date) == DATES, [r["dag_run_id"] for r in runs]
    states = {d: task_states(stack, DAG_ID, r["dag_run_id"]) for d, r in by_date.items()}
    if {d: r["state"] for d, r in by_date.items()} != dict.fromkeys(DATES, "success"):
        pytest.fail("not every backfill run succeeded: " + json.dumps(
            {d: {"run": by_date[d]["state"], "tasks": states[d]} for d in DATES}, indent=1))
    durations = {d: _ts(r["end_date"]) - _ts(r["start_date"]) for d, r in by_date.items()}
    print(f"backfill wall time {wall:.0f}s; per run {json.dumps({d: round(s) for d, s in durations.items()})}; "
          f"services memory MiB {mem}")

    # Never more than two runs at once (the backfill's max_active_runs).
    spans = sorted((_ts(r["start_date"]), _ts(r["end_date"])) for r in runs)
    for start, _ in spans:
        assert sum(1 for s, e in spans if s <= start < e) <= 2, spans

    # One job per run, each on its own objects.
    pods, services, cms = rec.of("pod"), rec.of("service"), rec.of("configmap")
    run_of_job: dict[str, set[str]] = defaultdict(set)
    for obj in pods + services + cms:
        run_of_job[obj.labels["tfk8s.io/job"]].add(obj.labels["tfk8s.io/run"])
    assert len(run_of_job) == 3 and all(len(r) == 1 for r in run_of_job.values()), dict(run_of_job)
    assert len({next(iter(r)) for r in run_of_job.values()}) == 3, dict(run_of_job)
    for obj in pods + services + cms:
        assert obj.name.startswith(obj.labels["tfk8s.io/job"]), obj.name
    per_job_pods = defaultdict(list)
    for p in pods:
        per_job_pods[p.labels["tfk8s.io/job"]].append(p.name)
    assert all(len(names) == 3 for names in per_job_pods.values()), dict(per_job_pods)  # ps-0, worker-0/1
    assert len({p.name for p in pods}) == len(pods) == 9
    # per job: the shard ConfigMap and the pod templates (recovery recreates replicas from them)
    assert len(services) == 3 and len(cms) == 6
    assert sorted(c.name.rsplit("-", 1)[1] for c in cms) == ["pods"] * 3 + ["shards"] * 3

    # Two runs' jobs existed at the same time.
    n, jobs = rec.max_concurrent_jobs()
    assert n >= 2, f"the jobs never overlapped (max {n} at once; {len(rec.snapshots)} polls)"
    overlap = sum(rec.interval for _, js in rec.snapshots if len(js) >= 2)
    print(f"jobs at once: max {n} ({sorted(jobs)}), about {overlap:.0f}s with two")

    # The backfill itself, as the REST API reports it.
    def backfill():
        (b,) = stack.get("backfills", params={"dag_id": DAG_ID})["backfills"]
        return b if b["completed_at"] else None

    b = wait_until(backfill, 60, "the backfill to be marked completed", interval=2)
    assert b["max_active_runs"] == 2 and b["reprocess_behavior"] == "completed", b
    assert b["dag_run_conf"] == conf, b

    # Each run trained on its own partition into its own model directory.
    evals, promos = {}, {}
    for d, r in by_date.items():
        setup = stack.xcom(DAG_ID, r["dag_run_id"], "train.setup")
        assert setup, d
        evals[d] = stack.xcom(DAG_ID, r["dag_run_id"], "evaluate")
        promos[d] = stack.xcom(DAG_ID, r["dag_run_id"], "promote")
        model_dir = root / "models" / f"dt={d}"
        metrics = json.loads((model_dir / "metrics.json").read_text())
        assert metrics["final_step"] >= 200, metrics
        assert evals[d]["accuracy"] > 0.6, evals[d]
        manifest = json.loads((root / "cache" / f"dt={d}" / "_manifest.json").read_text()) \
            if (root / "cache" / f"dt={d}" / "_manifest.json").exists() else None
        if manifest is not None:
            assert f"dt={d}" in json.dumps(manifest), manifest
    assert len({e["accuracy"] for e in evals.values()}) > 1, evals  # different data, different models
    print("accuracy " + json.dumps({d: round(e["accuracy"], 4) for d, e in evals.items()}) + "; promotion "
          + json.dumps({d: {k: p.get(k) for k in ("promoted", "previous", "reason")} for d, p in promos.items()}))

    # Promotion: only improving models; the current one is the best of all.
    current = json.loads((root / "serving" / "current.json").read_text())
    best = max(evals, key=lambda d: evals[d]["accuracy"])
    assert current["version"] == best and current["value"] == pytest.approx(evals[best]["accuracy"]), current
    promoted = {d for d, p in promos.items() if p["promoted"]}
    for d, p in promos.items():
        if p["promoted"]:
            if p.get("previous"):
                assert evals[d]["accuracy"] > evals[p["previous"]]["accuracy"], (d, p)
                assert p["previous"] in promoted, (d, p)
        else:
            assert p["value"] <= p["current"]["value"], (d, p)
    # The promoted versions form one chain of strictly improving models ending at current.
    chain, version = [], current["version"]
    while version:
        chain.append(version)
        version = promos[version].get("previous")
    assert set(chain) == promoted, (chain, promoted)
    values = [evals[v]["accuracy"] for v in reversed(chain)]
    assert values == sorted(values) and len(set(values)) == len(values), values
    versions = {p.name for p in (root / "serving" / "versions").iterdir() if not p.name.startswith(".")}
    assert versions == promoted, versions
    for v in versions:
        record = json.loads((root / "serving" / "versions" / v / "promotion.json").read_text())
        assert record["metrics"]["accuracy"] == pytest.approx(evals[v]["accuracy"]), record

    # Asset events: one per staged partition (its manifest), one per promoted model; the deployment DAG
    # scheduled on the model asset ran for the promoted models.
    staged = _asset_events(stack, "tfk8s-clicks-staged")
    assert sorted(e["extra"]["partition"] for e in staged) == [f"dt={d}" for d in DATES], staged
    assert all(e["extra"]["manifest"].endswith("_tfk8s_manifest.json") and e["extra"]["files"] >= 1
               for e in staged), staged
    models = _asset_events(stack, "tfk8s-ctr-model")
    assert sorted(e["extra"]["version"] for e in models) == sorted(promoted), models
    assert all(e["extra"]["metric"] == "accuracy" and e["extra"]["path"].endswith(e["extra"]["version"])
               for e in models), models
    # The stack's scheduler runs without job schedules (no automatic "yesterday" run of the daily DAG),
    # which also holds asset-triggered runs back: pause the daily DAG and turn schedules on, so the
    # model events queued above trigger the deployment DAG.
    resp = stack.api.patch(stack.url(f"api/v2/dags/{DAG_ID}"), json={"is_paused": True}, timeout=30)
    assert resp.status_code == 200, resp.text
    stack.env["AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE"] = "True"
    stack.restart("scheduler", signal.SIGTERM)
    deploys = stack.wait_for_runs("tfk8s_deploy_model", count=1, timeout=300)
    assert all(r["state"] == "success" and r["run_type"] == "asset_triggered" for r in deploys), deploys
    deployed = json.loads((root / "serving" / "deployed.json").read_text())
    assert deployed["version"] in promoted, deployed

    # Nothing of the jobs remains.
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)


def _asset_events(stack, name: str) -> list[dict]:
    assets = stack.get("assets", params={"name_pattern": name})["assets"]
    (asset,) = [a for a in assets if a["name"] == name]
    return stack.get("assets/events", params={"asset_id": asset["id"], "limit": 100})["asset_events"]
