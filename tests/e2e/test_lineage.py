"""Lineage of the daily retraining DAG, as the OpenLineage provider collects it on the devstack.

A stack of its own (the e2e stack's services on PostgreSQL, LocalExecutor) with the OpenLineage provider's
file transport (``[openlineage] transport``: one JSON file per event in the stack's home). One run of
``tfk8s_retrain_daily`` for a published partition: HDFS sensor, staging onto the GlusterFS cache, a real
TensorFlow PS/worker job on the real node, evaluation, promotion. The events the provider's listener wrote
for it name the HDFS partition (staging's input), the staged directory (staging's output, setup's input),
the model directory (setup's output, promotion's input) and the promoted version (promotion's output); setup's
``tfk8s_job`` run facet holds the job without the value of any environment variable or its command.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e._support import E2E_MARKS, env_root, leftovers, publish, task_states, wait_gone
from tests.fixtures.airflow_services import running_stack

pytestmark = [*E2E_MARKS, pytest.mark.timeout(1500)]

DAG_ID = "tfk8s_retrain_daily"
DATE = "2026-03-01"
PROBE_NAME, PROBE_VALUE = "LINEAGE_PROBE_SECRET", "probe-value-never-in-an-event"
EVENTS_WAIT_S = 120  # the listener writes a task's events from the task's process, after it ended


@pytest.fixture(scope="module")
def lineage_stack(request, realnode, hdfs_server, gluster_volume, k8s_cluster, tmp_path_factory):
    events = tmp_path_factory.mktemp("openlineage")
    transport = {"type": "file", "log_file_path": str(events / "ol"), "debug_mode": True}
    env = {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "tfk8s-e2e",
           # An environment variable of the pods (the DAG's TFK8S_POD_ENV) whose value must never reach an event.
           "TFK8S_POD_ENV": json.dumps({PROBE_NAME: PROBE_VALUE})}
    with running_stack(request, gluster_volume, extra_env=env, dag_ids=(DAG_ID,)) as stack:
        yield stack, events


def read_events(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("ol-*.json"))]


def complete(events: list[dict], task_id: str) -> dict | None:
    """The COMPLETE event of ``<dag>.<task>``, if written."""
    name = f"{DAG_ID}.{task_id}"
    done = [e for e in events if e.get("eventType") == "COMPLETE" and e["job"]["name"] == name]
    return done[-1] if done else None


def names(datasets: list[dict]) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for d in datasets}


def test_the_daily_runs_events_name_the_partition_the_staged_directory_and_the_model(lineage_stack, k8s_cluster,
                                                                                     k8s_namespace):
    (stack, folder), core = lineage_stack, k8s_cluster.core_v1
    root = env_root(stack)
    publish(stack.env, DATE)
    t0 = time.monotonic()
    stack.cli("backfill", "create", "--dag-id", DAG_ID, "--from-date", DATE, "--to-date", DATE,
              "--reprocess-behavior", "completed", "--dag-run-conf",
              json.dumps({"namespace": k8s_namespace, "steps": 200}))
    (run,) = [r for r in stack.wait_for_runs(DAG_ID, count=1, timeout=900) if r["run_type"] == "backfill"]
    print(f"run {run['dag_run_id']} {run['state']} in {time.monotonic() - t0:.0f}s")
    assert run["state"] == "success", task_states(stack, DAG_ID, run["dag_run_id"])

    deadline = time.monotonic() + EVENTS_WAIT_S
    tasks = ("stage", "train.setup", "promote")
    while True:
        events = read_events(folder)
        found = {t: complete(events, t) for t in tasks}
        if all(found.values()) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert all(found.values()), ({t: bool(e) for t, e in found.items()},
                                 sorted({e["job"]["name"] for e in events}))
    print(f"{len(events)} OpenLineage events; jobs: {sorted({e['job']['name'] for e in events})}")

    staged = ("file", f"{root}/cache/dt={DATE}")
    model = ("file", f"{root}/models/dt={DATE}")
    stage, setup, promote = found["stage"], found["train.setup"], found["promote"]
    # Staging: the HDFS partition in (namespace the NameNode of the WebHDFS connection), the copy out.
    partition = [d for d in stage["inputs"] if d["namespace"].startswith("hdfs://")]
    assert [d["name"] for d in partition] == [f"data/clicks/dt={DATE}"], stage["inputs"]
    assert staged in names(stage["outputs"]), stage["outputs"]
    # Training: the staged directory in, the model directory out, the job's facet.
    assert staged in names(setup["inputs"]), setup["inputs"]
    assert model in names(setup["outputs"]), setup["outputs"]
    facet = setup["run"]["facets"]["tfk8s_job"]
    job = stack.xcom(DAG_ID, run["dag_run_id"], "train.setup", "job")
    assert facet["job"]["job"] == job["job"] and facet["job"]["namespace"] == k8s_namespace, facet
    assert {r: v["replicas"] for r, v in facet["job"]["roles"].items()} == {"ps": 1, "worker": 2}, facet
    text = json.dumps(facet)
    # The pods' environment (TFK8S_POD_ENV) by name only; no value, no command, no args.
    assert PROBE_NAME in facet["job"]["roles"]["worker"]["env_names"], facet
    assert PROBE_VALUE not in json.dumps(events)
    assert "tfk8s_airflow.pod.trainer" not in text and "--learning-rate" not in text
    # Promotion: the model in, the promoted version out.
    assert model in names(promote["inputs"]), promote["inputs"]
    assert ("file", f"{root}/serving/versions/{DATE}") in names(promote["outputs"]), promote["outputs"]
    assert wait_gone(core, k8s_namespace) == [], leftovers(core, k8s_namespace)
