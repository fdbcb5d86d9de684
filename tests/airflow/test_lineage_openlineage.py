"""The staging, setup and promotion operators answer the OpenLineage provider's own extractor
(``DefaultExtractor``, what its listener calls): the HDFS partition, the staged directory, the model and the
promoted version as datasets, and setup's ``tfk8s_job`` run facet without a secret of the spec. Needs the
provider (the dev extra); scripts/matrix's cells, which have none, run tests/unit only."""
from __future__ import annotations

import json

import pytest

from tests.unit.test_lineage import NAMES, SECRETS, SPEC
from tfk8s_airflow.job.run.lineage import job_facet, model_dir

pytestmark = pytest.mark.airflow

#: A staging task's result after a copy onto the volume (its XCom, as setup receives it as ``shards``).
STAGED = {"shards": {"worker-0": ["/mnt/v/tfk8s/cache/dt=2026-01-01/train-0.csv"]},
          "manifest": "/mnt/v/tfk8s/cache/dt=2026-01-01/_tfk8s_manifest.json", "files": 1, "bytes": 10,
          "source": "hdfs:/data/clicks/dt=2026-01-01", "data_root": "/mnt/v/tfk8s/cache/dt=2026-01-01",
          "copied": 1, "skipped": 0, "seconds": 0.1, "bytes_copied": 10}


def _extract(operator, ti=None):
    """What the OpenLineage provider's listener gets from the operator: its own DefaultExtractor."""
    from airflow.providers.openlineage.extractors.base import DefaultExtractor

    extractor = DefaultExtractor(operator)
    return extractor.extract() if ti is None else extractor.extract_on_complete(ti)


def _names(datasets) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]


def test_setup_names_the_staged_directory_the_model_and_the_job():
    from openlineage.client.serde import Serde

    from tfk8s_airflow.operators.setup import TFJobSetupOperator

    setup = TFJobSetupOperator(task_id="setup", spec={"name": "x", "image": "i", "worker": 1}, shards=STAGED)
    start = _extract(setup)
    assert _names(start.inputs) == [("file", "/mnt/v/tfk8s/cache/dt=2026-01-01")] and not start.outputs
    setup._tfk8s_lineage = (job_facet(SPEC, NAMES), model_dir(SPEC))  # what _setup keeps once the spec resolved
    done = _extract(setup, ti=object())
    assert _names(done.inputs) == [("file", "/mnt/v/tfk8s/cache/dt=2026-01-01")]
    assert _names(done.outputs) == [("file", "/mnt/v/tfk8s/models/dt=2026-01-01")]
    facet = Serde.to_dict(done.run_facets["tfk8s_job"])
    assert facet["job"]["job"] == NAMES.job and facet["_schemaURL"].startswith("urn:tfk8s-airflow:")
    assert not [s for s in SECRETS if s in json.dumps(facet)]


def test_setup_without_a_staging_result_names_no_input():
    from tfk8s_airflow.operators.setup import TFJobSetupOperator

    plain = TFJobSetupOperator(task_id="setup", spec={"name": "x", "image": "i", "worker": 1},
                               shards={"worker-0": ["/a"]})
    assert _extract(plain).inputs == []
    # Shards of an HDFS staging without a copy hold bare HDFS paths: no NameNode to name them by.
    hdfs_only = {**STAGED, "data_root": "/data/clicks/dt=2026-01-01"}
    del hdfs_only["bytes_copied"]
    assert _extract(TFJobSetupOperator(task_id="s", spec={}, shards=hdfs_only)).inputs == []


def test_staging_names_the_hdfs_partition_in_and_the_staged_directory_out(monkeypatch):
    from tfk8s_airflow.operators.staging import HdfsStageOperator, _lineage

    monkeypatch.setenv("AIRFLOW_CONN_WEBHDFS_LINEAGE", json.dumps(
        {"conn_type": "webhdfs", "host": "nn.example", "port": 9870, "login": "hdfs"}))
    stage = HdfsStageOperator(task_id="stage", input_path="/data/clicks/dt=2026-01-01", cache_dir="/mnt/v/c",
                              webhdfs_conn_id="webhdfs_lineage")
    partition = ("hdfs://nn.example:9870", "data/clicks/dt=2026-01-01")
    assert _names(_extract(stage).inputs) == [partition]
    stage._tfk8s_result = STAGED  # what _announce keeps when the copy is published
    done = _extract(stage, ti=object())
    assert _names(done.inputs) == [partition]
    assert _names(done.outputs) == [("file", "/mnt/v/tfk8s/cache/dt=2026-01-01")]  # the copy, as setup reads it
    # Without a copy the manifest is what the task wrote (here on HDFS).
    no_copy = {k: v for k, v in STAGED.items() if k != "bytes_copied"} | {"manifest": "hdfs:///m/_manifest.json"}
    assert _lineage(stage, no_copy)[1] == ["hdfs://nn.example:9870/m/_manifest.json"]


def test_promotion_names_the_model_in_and_the_promoted_version_out(tmp_path):
    from tfk8s_airflow.operators.promotion import ModelPromoteOperator

    model = tmp_path / "models" / "dt=2026-01-01"
    (model / "variables").mkdir(parents=True)
    (model / "saved_model.pb").write_text("m")
    op = ModelPromoteOperator(task_id="promote", model_dir=str(model), serving_root=str(tmp_path / "serving"),
                              metrics={"accuracy": 0.9}, version="2026-01-01")
    result = op.execute({})
    assert result["promoted"], result
    done = _extract(op, ti=object())
    assert _names(done.inputs) == [("file", str(model))]
    assert _names(done.outputs) == [("file", str(tmp_path / "serving" / "versions" / "2026-01-01"))]
    # Not promoted (no better than the current): no output.
    worse = ModelPromoteOperator(task_id="promote", model_dir=str(model), serving_root=str(tmp_path / "serving"),
                                 metrics={"accuracy": 0.5}, version="2026-01-02")
    assert not worse.execute({})["promoted"]
    assert _extract(worse, ti=object()).outputs == []
