"""Extra links the tasks store: only values a link may point to are ever stored."""
from tfk8s_airflow.links import ReplicaLogLink, TensorBoardLink, link_xcom, replica_log_url


def test_the_replica_log_link_points_only_at_this_airflows_own_view_routes():
    good = "/tfk8s/api/runs/d/manual__2026-01-01T00%3A00%3A00%2B00%3A00/jobs/j/logs/worker-0"
    assert ReplicaLogLink.accept(good) == good
    for bad in ("http://evil.example/tfk8s/api/runs/x", "//evil.example/tfk8s/api/runs/x", "javascript:alert(1)",
                "/dags/x", "", None, 7, "tfk8s/api/runs/relative"):
        assert ReplicaLogLink.accept(bad) is None, bad
        assert link_xcom(ReplicaLogLink, bad) == {}
    assert link_xcom(ReplicaLogLink, good) == {"_link_ReplicaLogLink": good}
    assert TensorBoardLink.accept("/tfk8s/api/runs/x") is None  # TensorBoard: absolute http(s) only


def test_the_replica_log_url_quotes_each_part_under_the_api_servers_base_path(monkeypatch):
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://airflow.example:8080/")
    url = replica_log_url("d/x", "manual__2026-01-01T00:00:00+00:00", "j", "worker-0")
    assert url == "/tfk8s/api/runs/d%2Fx/manual__2026-01-01T00%3A00%3A00%2B00%3A00/jobs/j/logs/worker-0"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://example.org/airflow")
    assert replica_log_url("d", "r", "j", "ps-0") == "/airflow/tfk8s/api/runs/d/r/jobs/j/logs/ps-0"
    assert ReplicaLogLink.accept(replica_log_url("d", "r", "j", "ps-0"))
