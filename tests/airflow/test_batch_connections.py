"""Setup's batches on the real API server keep their connections alive.

A request sent with ``_preload_content=False`` whose body is never read keeps its connection
out of the pool, so the next request opens a new TLS connection: a 512-pod setup then made
over a thousand handshakes and took twice as long (docs/benchmarks.md). Counted here with
urllib3's own count of connections its pool opened.
"""
from __future__ import annotations

CONCURRENCY = 4
PODS = 24


def _opened(client) -> int:
    pools = client._api_client.rest_client.pool_manager.pools  # urllib3's container: keys(), no iteration
    keys = list(pools.keys())
    return sum(pools[key].num_connections for key in keys)


def test_create_and_release_of_a_batch_open_no_more_connections_than_its_concurrency(k8s_cluster, k8s_namespace):
    from tfk8s_airflow.job.builders.objects import JobNames, plan_replicas, pod_manifest
    from tfk8s_airflow.job.spec import parse_spec
    from tfk8s_airflow.k8s.client import JobClient

    spec = parse_spec({"name": "conns", "namespace": k8s_namespace, "image": "tfk8s/trainer:0.1",
                                "node_selector": {"type": "kwok"}, "ps": 1, "worker": PODS - 1})
    names = JobNames.for_run(spec, "run-1")
    pods = [pod_manifest(spec, names, r, gated=True) for r in plan_replicas(spec, names)]
    client = JobClient.from_conn("kubernetes_default", pool_size=CONCURRENCY)

    assert client.dry_run_pod(pods[0]) is None
    batch = client.create_pods(pods, CONCURRENCY)
    client.release_gates(k8s_namespace, [p["metadata"]["name"] for p in pods], CONCURRENCY)

    assert len(batch.created) == PODS
    live = client.list_pods(k8s_namespace, names.selector)
    assert len(live) == PODS and not any(p.spec.scheduling_gates for p in live)
    # 2 x 24 + 2 requests; one connection per parallel request at most, each reused.
    assert 1 <= _opened(client) <= CONCURRENCY


def test_a_configmap_of_the_same_name_is_written_over_not_reused(k8s_cluster, k8s_namespace):
    """Setup writes the pod templates over whatever ConfigMap has their name (a retry's, or one
    made before setup ran), so the data recovery checks against the record's digest is setup's."""
    from tfk8s_airflow.k8s.client import JobClient

    client = JobClient.from_conn("kubernetes_default")
    planted = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"pods": "planted"},
               "metadata": {"name": "job-pods", "namespace": k8s_namespace}}
    ours = {**planted, "data": {"pods": "setup's"}}
    assert client.create_or_replace_configmap(planted) is True
    assert client.create_or_replace_configmap(ours) is False
    assert k8s_cluster.core_v1.read_namespaced_config_map("job-pods", k8s_namespace).data == {"pods": "setup's"}
