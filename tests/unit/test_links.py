"""Extra links the tasks store: only values a link may point to are ever stored."""
from tfk8s_airflow.links import ReplicaLogLink, TensorBoardLink, link_xcom, replica_log_url, store_link


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


def test_finalize_gets_what_the_task_stored_without_reading_an_xcom(monkeypatch):
    """The task runner's finalize calls get_link for every extra link; a read of an absent XCom
    logs `[error] XCom not found` into the task log, so get_link never reads one."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time import xcom

    class NoReads:
        @staticmethod
        def get_value(**kwargs):
            raise AssertionError(f"get_link read an XCom: {kwargs}")

        get_one = get_value

    monkeypatch.setattr(xcom, "XCom", NoReads)
    pushed = []
    ti = SimpleNamespace(dag_id="d", task_id="train.replica", run_id="r", map_index=3,
                         xcom_push=lambda key, value: pushed.append((key, value)))
    other = SimpleNamespace(dag_id="d", task_id="train.replica", run_id="r", map_index=4)
    url = replica_log_url("d", "r", "j", "worker-1")
    assert ReplicaLogLink().get_link(None, ti_key=ti) == ""  # nothing stored (deferral, no log directory)
    assert store_link(ti, ReplicaLogLink, url)
    assert pushed == [("_link_ReplicaLogLink", url)]
    assert ReplicaLogLink().get_link(None, ti_key=ti) == url
    assert ReplicaLogLink().get_link(None, ti_key=other) == ""
    assert TensorBoardLink().get_link(None, ti_key=ti) == ""
    assert not store_link(ti, ReplicaLogLink, "http://evil.example/x") and len(pushed) == 1
