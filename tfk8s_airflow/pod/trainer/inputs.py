"""Which files a replica trains on, and loading them into arrays.

Why separate: both training modes and the evaluator decide their inputs the same way,
and the decision is the contract with the staging operators: ``--data`` wins (explicit),
otherwise this replica's shard from :func:`tfk8s_airflow.pod.runtime.my_shard` (the job's
ConfigMap or ``TFK8S_SHARD_FILES``). A TF2 chief reads on behalf of its workers, so when it
has no shard of its own it takes the union of every shard, in key order. An empty list is
refused here with a message naming where the list came from, before any TensorFlow work.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from tfk8s_airflow.exceptions import DataError, RuntimeConfigError
from tfk8s_airflow.pod import runtime
from tfk8s_airflow.pod.trainer.dataset import read_csv


def split_files(values: Sequence[str] | None) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``."""
    out: list[str] = []
    for v in values or ():
        out.extend(p for p in (s.strip() for s in v.split(",")) if p)
    return out


def training_files(cli_files: Sequence[str] | None, config: runtime.TFConfig,
                   union_if_missing: bool = False) -> list[str]:
    files = split_files(cli_files)
    source = "--data"
    if not files:
        try:
            files = runtime.my_shard(config=config)
            source = f"shard of {config.task_key}"
        except RuntimeConfigError:
            if not union_if_missing:
                raise
            shards = runtime.all_shards()
            files = [f for key in sorted(shards) for f in shards[key]]
            source = "union of all shards"
    if not files:
        raise DataError(f"no training files for {config.task_key} ({source} is empty)")
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise DataError(f"training files missing ({source}): {', '.join(missing[:5])}"
                        + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    return files


def load_arrays(files: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Features [n, d] float32 and labels [n] float32 of every row."""
    try:
        xs, ys = read_csv(files)
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read training data: {exc}") from None
    if not ys:
        raise DataError(f"no rows in {len(files)} file(s): {', '.join(files[:3])}")
    return np.asarray(xs, np.float32), np.asarray(ys, np.float32)
