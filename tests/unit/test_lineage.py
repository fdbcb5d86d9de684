"""Lineage: the URIs and dataset names of what the operators read and write, the ``tfk8s_job`` run facet
(never an environment value, a command or an argument), and the package without the OpenLineage provider.
The operators' answers to the provider's own extractor are in tests/airflow/test_lineage_openlineage.py
(the provider is in the dev extra, not in scripts/matrix's venvs, whose cells run tests/unit)."""
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
