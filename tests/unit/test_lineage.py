"""Lineage: the URIs and dataset names of what the operators read and write, the ``tfk8s_job`` run facet
(never an environment value, a command or an argument), the operators' answers to the OpenLineage
provider's own extractor, and the package without the provider."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tfk8s_airflow.assetnames import dataset_name, hdfs_uri, location_uri, volume_uri
from tfk8s_airflow.job.builders.objects import JobNames
from tfk8s_airflow.job.run.lineage import job_facet, model_dir
from tfk8s_airflow.job.spec import parse_spec

REPO = Path(__file__).resolve().parents[2]
SECRETS = ("s3cret-token", "hunter2", "p4ss-in-arg", "tmpl-secret", "user:pw")
SPEC = parse_spec({
    "name": "ctr", "image": "trainer:1", "command": ["python", "-m", "train", "--token", "p4ss-in-arg"],
    "args": ["--password", "hunter2"], "env": {"API_TOKEN": "s3cret-token"},
    "code": {"uri": "https://user:pw@code.example/train.tar.gz"},
    "volumes": [{"name": "data", "mount_path": "/data", "host_path": "/mnt/v/tfk8s/cache", "read_only": True},
                {"name": "model", "mount_path": "/model", "host_path": "/mnt/v/tfk8s/models/dt=2026-01-01"}],
    "ps": 1, "worker": {"replicas": 2, "env": {"WORKER_SECRET": "tmpl-secret"}}})
NAMES = JobNames.for_run(SPEC, "scheduled__2026-01-01", "train", "tfk8s_retrain_daily")
#: A staging task's result after a copy onto the volume (its XCom, as setup receives it as ``shards``).
STAGED = {"shards": {"worker-0": ["/mnt/v/tfk8s/cache/dt=2026-01-01/train-0.csv"]},
          "manifest": "/mnt/v/tfk8s/cache/dt=2026-01-01/_tfk8s_manifest.json", "files": 1, "bytes": 10,
          "source": "hdfs:/data/clicks/dt=2026-01-01", "data_root": "/mnt/v/tfk8s/cache/dt=2026-01-01",
          "copied": 1, "skipped": 0, "seconds": 0.1, "bytes_copied": 10}


def test_the_uris_and_their_dataset_names():
    uri = hdfs_uri("http://nn.example:9870", "/data/clicks/dt=2026-01-01/")
    assert uri == "hdfs://nn.example:9870/data/clicks/dt=2026-01-01"
    # As the apache-hdfs provider converts hdfs:// URIs: namespace the NameNode, name the path without "/".
    assert dataset_name(uri) == ("hdfs://nn.example:9870", "data/clicks/dt=2026-01-01")
    assert volume_uri("/mnt/v/tfk8s/cache/dt=2026-01-01") == "file:///mnt/v/tfk8s/cache/dt=2026-01-01"
    # As Airflow's common-io provider converts file:// URIs: namespace "file", name the path.
    assert dataset_name("file:///mnt/v/x") == ("file", "/mnt/v/x")
    assert location_uri("hdfs:/data/x", "http://nn:9870") == "hdfs://nn:9870/data/x"
    assert location_uri("hdfs:///data/x", "nn:9870") == "hdfs://nn:9870/data/x"
    assert location_uri("hdfs://other:8020/data/x/") == "hdfs://other:8020/data/x"
    assert location_uri("hdfs:/data/x") is None  # an HDFS path without a NameNode cannot be named
    assert location_uri("relative/dir") is None
    assert location_uri("/mnt/v/a/../b") == "file:///mnt/v/b"
    with pytest.raises(ValueError, match="NameNode"):
        hdfs_uri("", "/x")
    with pytest.raises(ValueError):
        dataset_name("s3://bucket/key")


def test_the_job_facet_holds_the_spec_but_no_env_value_command_or_argument():
    facet = job_facet(SPEC, NAMES)
    text = json.dumps(facet)
    assert not [s for s in SECRETS if s in text], text
    assert facet["job"] == NAMES.job and facet["namespace"] == NAMES.namespace and facet["image"] == "trainer:1"
    assert {r: v["replicas"] for r, v in facet["roles"].items()} == {"ps": 1, "worker": 2}
    assert "API_TOKEN" in facet["roles"]["ps"]["env_names"]
    assert "WORKER_SECRET" in facet["roles"]["worker"]["env_names"]  # the names only
    assert facet["code"]["uri"].startswith("https://") and "code.example" in facet["code"]["uri"]
    assert [v["name"] for v in facet["volumes"]] == ["data", "model"]
    assert model_dir(SPEC) == "/mnt/v/tfk8s/models/dt=2026-01-01"


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


def test_the_package_and_the_dags_work_without_the_openlineage_provider():
    """With OpenLineage's client library unimportable (what the provider and tfk8s_airflow.lineage's facets
    need), the operators import and the repository's DAGs build. (scripts/matrix runs the unit tests in venvs
    without the provider at all.)"""
    code = """
import sys
sys.modules["openlineage"] = None  # any import of it raises ImportError
from pathlib import Path
from airflow.dag_processing.dagbag import DagBag
import tfk8s_airflow.lineage, tfk8s_airflow.operators.staging, tfk8s_airflow.operators.setup
import tfk8s_airflow.operators.promotion, tfk8s_airflow.provider
bag = DagBag(dag_folder=sys.argv[1], safe_mode=False, bundle_path=Path(sys.argv[1]), bundle_name="dags-folder")
assert not bag.import_errors, bag.import_errors
assert "tfk8s_retrain_daily" in bag.dag_ids, bag.dag_ids
assert not [m for m in sys.modules if m.startswith("openlineage") and sys.modules[m] is not None]
print("ok", len(bag.dag_ids))
"""
    res = subprocess.run([sys.executable, "-c", code, str(REPO / "dags")], capture_output=True, text=True,
                         timeout=300, cwd=str(REPO))
    assert res.returncode == 0 and "\nok 4" in "\n" + res.stdout, (res.stdout[-2000:], res.stderr[-3000:])
