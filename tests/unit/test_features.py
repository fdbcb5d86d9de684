"""The features that need Airflow 3.3, checked against the Airflow installed (scripts/matrix runs
this on the lowest and the newest supported Airflow, so the version cuts are tested both ways)."""
from __future__ import annotations

import asyncio
import inspect
import re
import warnings
from importlib import metadata
from types import SimpleNamespace

import airflow
import pytest

from tfk8s_airflow import features
from tfk8s_airflow.exceptions import AirflowFeatureMissingError
from tfk8s_airflow.links import axcom_push


def test_the_version_parse():
    assert features._parse("3.2.0") == (3, 2, 0)
    assert features._parse("3.3.2+astro.1") == (3, 3, 2)
    assert features._parse("3.4") == (3, 4, 0)


def test_the_minimum_is_the_pin():
    """The installed package's requirement on Airflow (its metadata: setup.cfg's pin) starts at MINIMUM."""
    pins = [r for r in metadata.requires("tfk8s-airflow") or [] if re.match(r"apache-airflow\s*[<>=!]", r)]
    pin = re.search(r">=\s*([\d.]+)", pins[0]) if len(pins) == 1 else None
    assert pin is not None, pins
    assert features._parse(pin.group(1)) == features.MINIMUM
    assert features.airflow_version() >= features.MINIMUM


def test_the_scheduler_starts_tasks_in_the_triggerer_from_the_version_said():
    """Airflow 3.1 and 3.2 ship the scheduler's start_from_trigger commented out; 3.3 calls defer_task."""
    from airflow.models.dagrun import DagRun

    source = inspect.getsource(DagRun.schedule_tis)
    active = any("defer_task(" in line and not line.lstrip().startswith("#") for line in source.splitlines())
    assert active == features.has(features.START_FROM_TRIGGER)
    note = features.worker_start_note()
    if active:
        assert note is None
    else:
        assert note is not None and f"Airflow {airflow.__version__} starts this task on a worker" in note


def test_an_xcom_from_the_triggerer_exists_from_the_version_said():
    from airflow.sdk.execution_time.xcom import XCom

    assert hasattr(XCom, "aset") == features.has(features.XCOM_FROM_TRIGGERER)


def test_asset_partitions_exist_from_the_version_said():
    from airflow.sdk.execution_time.context import OutletEventAccessor

    assert hasattr(OutletEventAccessor, "add_partitions") == features.has(features.ASSET_PARTITIONS)


def test_the_outlet_event_gets_the_partition_key_only_where_the_task_sdk_has_it(monkeypatch):
    from airflow.sdk import Asset

    from tfk8s_airflow.operators.base import describe_outlets

    asset = Asset("clicks", uri="file:///clicks")
    added = []
    accessor = SimpleNamespace(extra={}, add_partitions=added.append)
    for since, expected in (((3, 0, 0), ["dt=1"]), ((99, 0, 0), [])):
        added.clear()
        monkeypatch.setattr(features, "ASSET_PARTITIONS", since)
        describe_outlets({"outlet_events": {asset: accessor}}, [asset], {"partition": "dt=1"}, "dt=1")
        assert added == expected and accessor.extra["partition"] == "dt=1"


def test_without_xcom_aset_the_push_says_why(monkeypatch):
    from airflow.sdk.execution_time import xcom

    class OldXCom:  # the task SDK of Airflow 3.2: no aset
        pass

    monkeypatch.setattr(xcom, "XCom", OldXCom)
    ti = SimpleNamespace(dag_id="d", task_id="t", run_id="r", map_index=0)
    with pytest.raises(AirflowFeatureMissingError, match=r"cannot write an XCom from the triggerer .*3\.3\.0"):
        asyncio.run(axcom_push(ti, "progress", {}))


def test_the_replica_operator_takes_the_providers_arguments_it_sets():
    """TFReplicaPodOperator sets on_kill_action (provider 10.15.0+), on_finish_action,
    reattaching (reattach_on_restart, or durable from provider 10.25 on) and base_container_name;
    an older provider refuses the task when it is unmapped at run time (a DAG parse does not build
    mapped tasks, so it would not show). No argument it sets is deprecated: no warning at all."""
    from tfk8s_airflow.operators.replica import TFReplicaPodOperator

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op = TFReplicaPodOperator(task_id="replica", job={}, replica="worker-0")
    assert op.reattach_on_restart is True and op.base_container_name == "tensorflow"
    assert getattr(op, "durable", True) is True


def test_durable_exists_from_the_provider_version_said():
    """provider 10.25 adds durable (deprecating reattach_on_restart); it takes effect from Airflow 3.3."""
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    has_durable = "durable" in inspect.signature(KubernetesPodOperator.__init__).parameters
    assert has_durable == (features.provider_version() >= features.PROVIDER_DURABLE)
    kwargs = features.reattach_kwargs()
    if not has_durable:
        assert kwargs == {"reattach_on_restart": True}
    else:
        assert kwargs == ({"durable": True} if features.has(features.DURABLE) else {})
