"""Fixtures of the real-pod tests: the real node (every test namespace may pull the training image), data,
model dirs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.realpods.support import REPO


@pytest.fixture(scope="module")
def node(realnode):
    """The real node (its pods run the training image, which has TensorFlow)."""
    return realnode


@pytest.fixture
def k8s_namespace(k8s_namespace, node):
    """The test's namespace, whose pods may pull the training image (the registry's pull secret)."""
    node.grant_pull(k8s_namespace)
    return k8s_namespace


@pytest.fixture
def allowed_host_paths(monkeypatch, tmp_path_factory):
    """The data, model and program directories of these tests are host paths outside the GlusterFS
    volume, so the deployment allows them ([tfk8s] allowed_host_paths), as its administrator would."""
    monkeypatch.setenv("AIRFLOW__TFK8S__ALLOWED_HOST_PATHS",
                       f"{tmp_path_factory.getbasetemp()},{REPO / 'tests' / 'tf' / 'programs'}")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, node) -> dict:
    out = tmp_path_factory.mktemp("realpod-data")
    subprocess.run([sys.executable, "-m", "tfk8s_airflow.pod.trainer.dataset", "--out", str(out), "--files", "4",
                    "--rows", "1000", "--seed", "7", "--workers", "2"], check=True, timeout=120)
    from tfk8s_realpod_scenarios import DATA  # noqa: PLC0415 - imports Airflow
    host = json.loads((out / "shards.json").read_text())
    # The pods see the data at DATA (a bind mount of the host directory): same file names.
    shards = {key: [f"{DATA}/{Path(p).name}" for p in files] for key, files in host.items()}
    return {"dir": str(out), "shards": shards, "heldout": str(out / "heldout.csv")}


@pytest.fixture
def model_dir(tmp_path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    return d
