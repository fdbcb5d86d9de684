"""Promotion against a model directory a pod wrote, and against metrics and versions that lie.

On the real GlusterFS mount. A link in the model to ``/proc/self/environ`` must not put the
worker's environment into ``serving/``; a NaN first metric must not block every later
promotion; a retrained version must never serve the old copy under the new metrics; a
promoter killed mid-copy must not leave its temporary directory behind for good.
"""
from __future__ import annotations

import json
import math
import secrets

import pytest

from tfk8s_airflow.exceptions import DataError, PathSafetyError
from tfk8s_airflow.volume import promotion

pytestmark = pytest.mark.gluster


def _model(root, name: str, content: bytes):
    d = root / "models" / name
    (d / "saved_model" / "variables").mkdir(parents=True)
    (d / "saved_model" / "saved_model.pb").write_bytes(content)
    (d / "saved_model" / "variables" / "variables.index").write_bytes(b"index " + content)
    return d


def _served(serving) -> tuple[dict, bytes, dict]:
    """current.json, the served model's bytes, and the promotion.json beside them."""
    cur = promotion.current(serving)
    return (cur, (serving / "versions" / cur["path"].rsplit("/", 1)[1] / "saved_model" / "saved_model.pb").read_bytes(),
            json.loads((serving / "versions" / cur["path"].rsplit("/", 1)[1] / "promotion.json").read_text()))


def test_promotion_copies_no_link_out_of_the_model(gluster_dir, monkeypatch):
    secret = f"s3cr3t-{secrets.token_hex(8)}"
    monkeypatch.setenv("AIRFLOW_CONN_METADATA", f"postgresql://airflow:{secret}@db:5432/airflow")
    model = gluster_dir / "models" / "dt=2026-01-01"
    (model / "saved_model" / "variables").mkdir(parents=True)
    (model / "saved_model" / "saved_model.pb").write_bytes(b"graph")
    (model / "saved_model" / "variables" / "environ").symlink_to("/proc/self/environ")
    serving = gluster_dir / "serving"
    with pytest.raises(PathSafetyError, match=r"variables/environ is a symbolic link"):
        promotion.promote(model, serving, "2026-01-01", {"accuracy": 0.9})
    copied = [p for p in serving.rglob("*") if p.is_file()]
    assert not any(secret.encode() in p.read_bytes() for p in copied), copied
    assert promotion.current(serving) is None
    assert [p.name for p in (serving / "versions").iterdir()] == []  # no version, no temporary copy left


def test_a_nan_metric_is_refused_and_blocks_nothing(gluster_dir):
    serving = gluster_dir / "serving"
    with pytest.raises(DataError, match="not a finite number"):
        promotion.promote(_model(gluster_dir, "a", b"A"), serving, "2026-01-01", {"accuracy": math.nan})
    assert promotion.current(serving) is None
    later = promotion.promote(_model(gluster_dir, "b", b"B"), serving, "2026-01-02", {"accuracy": 0.7})
    assert later["promoted"] and later["reason"] == "first model"
    # A current record with NaN (written before the rule) is beaten by any finite value.
    (serving / "current.json").write_text('{"version": "old", "value": NaN, "path": "x"}')
    again = promotion.promote(_model(gluster_dir, "c", b"C"), serving, "2026-01-03", {"accuracy": 0.6})
    assert again["promoted"] and "no finite accuracy" in again["reason"]
    assert _served(serving)[1] == b"C"


def test_a_retrained_version_is_never_served_from_its_old_copy(gluster_dir):
    serving = gluster_dir / "serving"
    promotion.promote(_model(gluster_dir, "v1-first", b"first training"), serving, "2026-01-01", {"accuracy": 0.80})
    promotion.promote(_model(gluster_dir, "v2", b"day two"), serving, "2026-01-02", {"accuracy": 0.85})
    retrained = _model(gluster_dir, "v1-again", b"retrained")
    res = promotion.promote(retrained, serving, "2026-01-01", {"accuracy": 0.90})
    assert res["promoted"] and res["previous"] == "2026-01-02"
    cur, served, record = _served(serving)
    assert cur["version"] == "2026-01-01" and cur["value"] == 0.90
    assert served == b"retrained" and record["metrics"] == {"accuracy": 0.90} and record["digest"] == cur["digest"]
    # The first copy is immutable: still there, unchanged, beside the retrained one.
    assert (serving / "versions" / "2026-01-01" / "saved_model" / "saved_model.pb").read_bytes() == b"first training"
    # The same content again is a no-op; retraining the current version better replaces it.
    assert promotion.promote(retrained, serving, "2026-01-01", {"accuracy": 0.90}).get("already")
    promotion.promote(_model(gluster_dir, "v1-third", b"third"), serving, "2026-01-01", {"accuracy": 0.95})
    cur, served, record = _served(serving)
    assert (served, cur["value"], record["metrics"]["accuracy"]) == (b"third", 0.95, 0.95)
    assert promotion.promote(_model(gluster_dir, "v1-worse", b"worse"), serving, "2026-01-01",
                             {"accuracy": 0.5})["promoted"] is False
    assert _served(serving)[1] == b"third"


def test_temporary_copies_of_a_killed_promoter_are_removed(gluster_dir):
    serving = gluster_dir / "serving"
    versions = serving / "versions"
    for leftover in (".2026-01-01.tmp-4242", ".promote-2026-01-01-deadbeef"):  # the last release's and this one's
        (versions / leftover / "saved_model").mkdir(parents=True)
        (versions / leftover / "saved_model" / "saved_model.pb").write_bytes(b"half")
    promotion.promote(_model(gluster_dir, "m", b"M"), serving, "2026-01-01", {"accuracy": 0.8})
    assert sorted(p.name for p in versions.iterdir()) == ["2026-01-01"]
