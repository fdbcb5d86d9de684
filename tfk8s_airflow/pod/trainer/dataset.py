"""Synthetic classification data with a known signal, written as CSV shards.

Why: the end-to-end tests must prove that a distributed job *learned* something, so the
data needs a signal whose best achievable accuracy is known, and it must be reproducible
byte for byte from a seed (the staging tests checksum it). Labels come from a hidden
linear rule plus Gaussian noise: ``y = 1[x . w + noise * e > 0]`` with ``|w| = 1``, so a
linear model can reach about ``1 - arccos(1/sqrt(1+noise^2))/pi`` accuracy (~0.91 for the
default noise 0.3) while chance is 0.5.

CSV (``label,f0,f1,...`` with a header) because it is readable by plain Python, by
``tf.data.experimental.CsvDataset`` and by a human looking at a staged file. Pure
standard library (``random``), so data can be made where TensorFlow is not installed.

``python -m tfk8s_airflow.pod.trainer.dataset --out DIR --files N --rows R --seed S``
writes ``train-0000i-of-0000N.csv``, ``heldout.csv``, ``dataset.json`` (the rule) and,
with ``--workers W``, a ``shards.json`` in the runtime's ``{"worker-<i>": [...]}`` layout.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
from collections.abc import Iterable, Sequence

DEFAULT_FEATURES = 8
DEFAULT_NOISE = 0.3


def true_weights(seed: int, features: int = DEFAULT_FEATURES) -> list[float]:
    """The hidden unit-norm weight vector for ``seed``."""
    rng = random.Random(f"weights-{seed}")
    w = [rng.gauss(0.0, 1.0) for _ in range(features)]
    norm = math.sqrt(sum(v * v for v in w)) or 1.0
    return [v / norm for v in w]


def bayes_accuracy(noise: float = DEFAULT_NOISE) -> float:
    """Best accuracy any classifier can reach on this data (chance is 0.5)."""
    return 1.0 - math.acos(1.0 / math.sqrt(1.0 + noise * noise)) / math.pi


def generate_rows(seed: int, stream: str, rows: int, weights: Sequence[float],
                  noise: float = DEFAULT_NOISE) -> Iterable[list[float]]:
    """Rows ``[label, f0, ...]``; each (seed, stream) pair is an independent sequence."""
    rng = random.Random(f"rows-{seed}-{stream}")
    for _ in range(rows):
        x = [rng.gauss(0.0, 1.0) for _ in weights]
        score = sum(a * b for a, b in zip(x, weights, strict=True)) + noise * rng.gauss(0.0, 1.0)
        yield [1.0 if score > 0 else 0.0, *x]


def header(features: int) -> list[str]:
    return ["label", *(f"f{i}" for i in range(features))]


def write_csv(path: str, rows: Iterable[list[float]], features: int) -> None:
    """Write atomically (temp name, then rename) so a reader never sees half a file."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header(features))
        for row in rows:
            w.writerow([int(row[0]), *(f"{v:.6f}" for v in row[1:])])
    os.replace(tmp, path)


def assign_shards(files: Sequence[str], workers: int, role: str = "worker") -> dict[str, list[str]]:
    """Round-robin ``files`` over ``workers`` replicas, keyed ``<role>-<i>``."""
    return {f"{role}-{i}": list(files[i::workers]) for i in range(workers)}


def generate(out: str, files: int, rows: int, seed: int, features: int = DEFAULT_FEATURES,
             heldout_rows: int | None = None, noise: float = DEFAULT_NOISE,
             workers: int = 0) -> dict:
    """Write the shards, the held-out file and ``dataset.json``; return that description."""
    if files < 1 or rows < 1 or features < 1:
        raise ValueError("files, rows and features must be >= 1")
    os.makedirs(out, exist_ok=True)
    w = true_weights(seed, features)
    train = []
    for i in range(files):
        path = os.path.join(out, f"train-{i:05d}-of-{files:05d}.csv")
        write_csv(path, generate_rows(seed, f"train-{i}", rows, w, noise), features)
        train.append(os.path.abspath(path))
    heldout = os.path.abspath(os.path.join(out, "heldout.csv"))
    write_csv(heldout, generate_rows(seed, "heldout", heldout_rows or rows, w, noise), features)
    desc = {
        "seed": seed, "features": features, "noise": noise, "weights": w,
        "rows_per_file": rows, "train_files": train, "heldout_file": heldout,
        "bayes_accuracy": bayes_accuracy(noise),
    }
    if workers:
        shards = assign_shards(train, workers)
        with open(os.path.join(out, "shards.json"), "w", encoding="utf-8") as fh:
            json.dump(shards, fh, indent=1, sort_keys=True)
        desc["shards_file"] = os.path.abspath(os.path.join(out, "shards.json"))
    with open(os.path.join(out, "dataset.json"), "w", encoding="utf-8") as fh:
        json.dump(desc, fh, indent=1, sort_keys=True)
    return desc


def read_csv(paths: Sequence[str]) -> tuple[list[list[float]], list[float]]:
    """Features and labels of every row in ``paths`` (plain Python, no TensorFlow)."""
    xs: list[list[float]] = []
    ys: list[float] = []
    for path in paths:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            head = next(reader, None)
            if not head or head[0] != "label":
                raise ValueError(f"{path}: not a dataset CSV (header must start with 'label')")
            for row in reader:
                if row:
                    ys.append(float(row[0]))
                    xs.append([float(v) for v in row[1:]])
    return xs, ys


def count_features(path: str) -> int:
    """Number of feature columns of a dataset CSV, from its header."""
    with open(path, newline="", encoding="utf-8") as fh:
        head = next(csv.reader(fh), None)
    if not head or head[0] != "label":
        raise ValueError(f"{path}: not a dataset CSV (header must start with 'label')")
    return len(head) - 1


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tfk8s_airflow.pod.trainer.dataset",
                                description="Write synthetic classification CSV shards.")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--files", type=int, default=4, help="number of training shards")
    p.add_argument("--rows", type=int, default=1000, help="rows per training shard")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--features", type=int, default=DEFAULT_FEATURES)
    p.add_argument("--heldout-rows", type=int, default=None, help="rows in heldout.csv (default --rows)")
    p.add_argument("--noise", type=float, default=DEFAULT_NOISE)
    p.add_argument("--workers", type=int, default=0, help="also write shards.json for N workers")
    a = p.parse_args(argv)
    desc = generate(a.out, a.files, a.rows, a.seed, a.features, a.heldout_rows, a.noise, a.workers)
    print(json.dumps({k: desc[k] for k in ("train_files", "heldout_file", "bayes_accuracy")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
