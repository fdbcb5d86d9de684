"""The job watch's progress from the chief's ``checkpoint`` file, against what a pod can plant.

The model directory is on the shared volume and the training pods write it: the ``checkpoint``
name may be a symbolic link to a file outside, a FIFO (an open for reading would block the
triggerer) or a huge file. Each must be refused, never followed, opened blocking or read
whole, and mean "no progress known" to the watch (said once in its log), never a crash.
A local directory stands in for the volume: the rules are the same on any POSIX file system
(tests/security/test_nofollow.py plants the same on the real GlusterFS mount).
"""
from __future__ import annotations

import logging
import os

import pytest

from tfk8s_airflow.exceptions import DataError, PathSafetyError
from tfk8s_airflow.job.run.judge import JobPolicy
from tfk8s_airflow.job.run.records import JobRecord
from tfk8s_airflow.k8s.watch import CHECKPOINT_FILE_MAX, JobWatch, WatchKey, checkpoint_step

pytestmark = pytest.mark.timeout(60)  # a FIFO opened the wrong way would block

CHECKPOINT = 'model_checkpoint_path: "ckpt-{step}"\nall_model_checkpoint_paths: "ckpt-{step}"\n'


def _watch(model_dir) -> JobWatch:
    policy = JobPolicy(replicas={"worker": 1}, tracked={"worker": True}, restart_policy={"worker": "Never"},
                       success=(("worker", 0),), max_restarts=0, schedule_timeout=60.0, startup_timeout=60.0,
                       active_deadline=None)
    record = JobRecord(job="j", namespace="ns", service="j", configmap="j-shards", selector="tfk8s.io/job=j",
                       policy=policy, replicas=(), created_at=0.0, model_dir=str(model_dir))
    return JobWatch(record, WatchKey(None, None, "ns", record.selector), 1.0, lambda: None)


def test_a_regular_checkpoint_file_gives_its_step(tmp_path):
    assert checkpoint_step(str(tmp_path)) is None  # nothing written yet
    assert checkpoint_step(str(tmp_path / "missing")) is None
    (tmp_path / "checkpoint").write_text(CHECKPOINT.format(step=150))
    assert checkpoint_step(str(tmp_path)) == 150
    assert _watch(tmp_path).checkpoint_progress() == 150


@pytest.mark.parametrize("plant", ["symlink", "fifo", "oversize"])
def test_a_planted_checkpoint_is_refused_and_means_no_progress(tmp_path, plant, caplog):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "checkpoint"
    secret.write_text(CHECKPOINT.format(step=999))
    model = tmp_path / "model"
    model.mkdir()
    target = model / "checkpoint"
    if plant == "symlink":
        target.symlink_to(secret)
        error, why = PathSafetyError, "symbolic link"
    elif plant == "fifo":
        os.mkfifo(target)
        error, why = PathSafetyError, "FIFO"
    else:
        text = CHECKPOINT.format(step=999)
        target.write_text(text + "#" * (CHECKPOINT_FILE_MAX + 1 - len(text)))  # a step in its first bytes
        error, why = DataError, f"larger than {CHECKPOINT_FILE_MAX} bytes"

    with pytest.raises(error, match=why):
        checkpoint_step(str(model))

    watch = _watch(model)
    with caplog.at_level(logging.WARNING, logger="tfk8s_airflow.k8s.watch"):
        assert watch.checkpoint_progress() is None
        assert watch.checkpoint_progress() is None
    said = [r.getMessage() for r in caplog.records if "checkpoint file is not read" in r.getMessage()]
    assert len(said) == 1 and why in said[0]
