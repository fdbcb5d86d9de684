"""The evaluator replica: follow the chief's checkpoints, evaluate each, exit after the last.

Why: TFJob users lost their final evaluation because the evaluator was killed as soon as
the chief finished. Here the evaluator is tracked and ends by itself: it evaluates every
new checkpoint it sees (``eval.json`` keeps the history), and once the chief's
``train_state.json`` says ``finished`` it evaluates the final model and exits 0. It never
joins the TensorFlow cluster (it reads the shared model directory only), so it cannot hang
a ParameterServerStrategy coordinator. Bounded by ``--eval-timeout``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

from tfk8s_airflow.exceptions import DataError, PeerTimeoutError
from tfk8s_airflow.pod import runtime
from tfk8s_airflow.pod.trainer import export
from tfk8s_airflow.pod.trainer.evaluate import evaluate
from tfk8s_airflow.pod.trainer.inputs import split_files
from tfk8s_airflow.pod.trainer.state import TRAIN_STATE, read_json, write_json_atomic

log = logging.getLogger("tfk8s_airflow.pod.trainer.eval_replica")


def run(cfg: runtime.TFConfig, args: argparse.Namespace) -> dict:
    heldout = split_files(args.heldout) or runtime.my_shard(config=cfg)
    if not heldout:
        raise DataError("evaluator has no held-out files (--heldout or its shard)")
    out = os.path.join(args.model_dir, "eval.json")
    history: list[dict] = []
    seen: str | None = None
    deadline = time.monotonic() + args.eval_timeout
    while True:
        state = read_json(os.path.join(args.model_dir, TRAIN_STATE), {}) or {}
        finished = state.get("finished") is True
        ckpt = export.latest_checkpoint(args.model_dir) if os.path.isdir(args.model_dir) else None
        if finished:
            final = evaluate(args.model_dir, heldout, args.threshold)
            write_json_atomic(out, {"final": final, "history": history})
            return final
        if ckpt and ckpt != seen:
            seen = ckpt
            history.append(evaluate(args.model_dir, heldout, source="checkpoint"))
            write_json_atomic(out, {"final": None, "history": history})
        if time.monotonic() > deadline:
            raise PeerTimeoutError(f"evaluator: the chief did not finish within {args.eval_timeout}s "
                                   f"({TRAIN_STATE} in {args.model_dir} never said finished)")
        time.sleep(args.eval_poll)
