"""Publish synthetic training partitions to HDFS: /data/clicks/dt=<date>/{train-*.csv, heldout.csv, _SUCCESS}.

Used by the demo and the backfill test. Each date gets its own seed, so every
partition differs; ``_SUCCESS`` is written last, as a producing job would.

    .venv/bin/python scripts/publish_dataset.py 2026-01-01 [2026-01-02 ...] [--files 4 --rows 2000]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hdfs import InsecureClient  # noqa: E402

from tfk8s_airflow.pod.trainer.dataset import generate  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dates", nargs="+")
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--root", default="/data/clicks")
    p.add_argument("--url", default=os.environ.get("TFK8S_WEBHDFS_URL", "http://127.0.0.1:9870"))
    p.add_argument("--user", default=os.environ.get("TFK8S_HDFS_USER", "tfk8s"))
    args = p.parse_args()
    client = InsecureClient(args.url, user=args.user)
    for date in args.dates:
        target = f"{args.root}/dt={date}"
        if client.status(f"{target}/_SUCCESS", strict=False):
            print(f"{target}: already published")
            continue
        seed = int(date.replace("-", "")) % 100_000
        with tempfile.TemporaryDirectory() as tmp:
            generate(tmp, files=args.files, rows=args.rows, seed=seed)
            client.makedirs(target)
            for name in sorted(os.listdir(tmp)):
                if name.endswith(".csv"):
                    client.upload(f"{target}/{name}", os.path.join(tmp, name), overwrite=True)
        client.write(f"{target}/_SUCCESS", data=b"", overwrite=True)
        print(f"{target}: published ({args.files} training files x {args.rows} rows, seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
