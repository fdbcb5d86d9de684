"""A Kubernetes connection that cannot be used fails setup at once, naming it and the fix: the
provider's real KubernetesHook, connections from AIRFLOW_CONN_* variables, no API server needed."""
from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowFailException

from tfk8s_airflow.exceptions import KubernetesConfigError, PermanentError
from tfk8s_airflow.k8s.client import JobClient
from tfk8s_airflow.operators.base import fail_permanently


def _conn(monkeypatch, conn_id: str, extra: dict) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kubernetes", "extra": extra}))


def test_a_missing_kubeconfig_is_permanent_and_named(monkeypatch, tmp_path):
    missing = tmp_path / "no-such-kubeconfig"
    _conn(monkeypatch, "tfk8s_missing_cfg", {"kube_config_path": str(missing)})
    with pytest.raises(KubernetesConfigError) as caught:
        JobClient.from_conn("tfk8s_missing_cfg")
    assert isinstance(caught.value, PermanentError)
    text = str(caught.value)
    assert "'tfk8s_missing_cfg' cannot load its configuration" in text and "fix: give the connection" in text


def test_an_unreadable_kubeconfig_is_permanent(monkeypatch, tmp_path):
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nclusters: [unclosed\n")
    _conn(monkeypatch, "tfk8s_broken_cfg", {"kube_config_path": str(broken)})
    with pytest.raises(KubernetesConfigError, match="'tfk8s_broken_cfg' cannot load its configuration"):
        JobClient.from_conn("tfk8s_broken_cfg")


def test_a_missing_connection_fails_the_task_without_retry():
    with pytest.raises(AirflowFailException) as caught, fail_permanently():
        JobClient.from_conn("tfk8s_no_such_connection")
    text = str(caught.value)
    assert text.startswith("KubernetesConfigError: the Kubernetes connection 'tfk8s_no_such_connection' does not exist")
    assert "AIRFLOW_CONN_TFK8S_NO_SUCH_CONNECTION=" in text
