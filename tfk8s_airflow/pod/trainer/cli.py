"""Command line of the reference trainer: ``python -m tfk8s_airflow.pod.trainer``.

Why one entry point for every role: the job's pods all run the same command and differ
only in ``TF_CONFIG`` (or the legacy ``--job_name/--task_index`` flags), exactly like a
TFJob, so the trainer decides from its task what to be (PS server, worker, chief,
evaluator). Every ending goes through :func:`tfk8s_airflow.pod.runtime.run_main`, so a bad
input exits 1 (permanent) and a lost peer exits 138 (retryable) for the pod's restart
policy. Defaults come from the ``TFK8S_*`` environment where the pod provides them.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Sequence

from tfk8s_airflow.exceptions import RuntimeConfigError
from tfk8s_airflow.pod import runtime

#: The flags whose default a pod's environment may set (a deployment can slow every job's reference
#: trainer, or make it log more often, for demos and shared test nodes, without editing each job's
#: arguments): flag -> (variable, type, default, smallest value, what a value must be). A job's own flag wins.
STEP_DELAY_ENV = "TRAINER_STEP_DELAY"
LOG_EVERY_ENV = "TRAINER_LOG_EVERY"
ENV_DEFAULTS = {
    "step_delay": (STEP_DELAY_ENV, float, 0.0, 0, "a number of seconds >= 0 (e.g. 0.05)"),
    "log_every": (LOG_EVERY_ENV, int, 50, 1, "a whole number of steps >= 1 (e.g. 10)"),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tfk8s_airflow.pod.trainer",
        description="Reference distributed TensorFlow trainer (PS/worker) for tfk8s-airflow.")
    p.add_argument("--mode", choices=("tf1", "tf2"), required=True,
                   help="tf1: between-graph async PS training; tf2: ParameterServerStrategy")
    p.add_argument("--model-dir", default=os.environ.get(runtime.MODEL_DIR_ENV),
                   help=f"checkpoints, SavedModel, metrics (default ${runtime.MODEL_DIR_ENV})")
    p.add_argument("--steps", type=int, default=500, help="total global steps")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--data", action="append", default=None,
                   help="training CSV files, comma-separated or repeated (default: my shard)")
    p.add_argument("--heldout", action="append", default=None,
                   help="held-out CSV files: chief adds heldout accuracy to metrics.json; "
                        "the evaluator evaluates on them")
    p.add_argument("--peer-timeout", type=float, default=300.0,
                   help="seconds to wait for peers' DNS and ports before failing (retryable)")
    p.add_argument("--checkpoint-every", type=int, default=100, help="steps between checkpoints")
    p.add_argument("--hidden", type=int, default=16, help="hidden units of the MLP")
    p.add_argument("--seed", type=int, default=0, help="weight initialisation seed")
    p.add_argument("--log-every", type=int, default=None,
                   help="TF1: local steps between progress logs, runtime.report() lines and summaries "
                        f"(default ${LOG_EVERY_ENV}, else 50)")
    p.add_argument("--no-summaries", dest="summaries", action="store_false",
                   help="write no TensorBoard summaries (default: the chief writes loss and examples/s "
                        "under <model-dir>/train)")
    p.add_argument("--stall-after", type=int, default=None,
                   help="stop making progress (but keep running) after this global step: for testing stall detection")
    p.add_argument("--step-delay", type=float, default=None,
                   help="seconds to sleep per step (slows a demo or test so a replica can be killed mid-run, "
                        f"or a job lasts without burning CPU); default ${STEP_DELAY_ENV}, else 0")
    p.add_argument("--threshold", type=float, default=None,
                   help="evaluator: fail when final accuracy is below this")
    p.add_argument("--eval-timeout", type=float, default=3600.0,
                   help="evaluator: give up when the chief has not finished by then")
    p.add_argument("--eval-poll", type=float, default=2.0, help="evaluator: seconds between polls")
    return p


def _config(rest: Sequence[str]) -> runtime.TFConfig:
    """TF_CONFIG wins; the legacy flags are used only when it is absent."""
    uses_flags = any(a.split("=")[0] in ("--job_name", "--job-name") for a in rest)
    if os.environ.get(runtime.TF_CONFIG_ENV) or not uses_flags:
        if rest:
            raise RuntimeConfigError(f"unknown arguments: {' '.join(rest)}")
        return runtime.tf_config()
    cfg, unknown = runtime.parse_legacy_flags(rest)
    if unknown:
        raise RuntimeConfigError(f"unknown arguments: {' '.join(unknown)}")
    return cfg


def _env_default(dest: str, given: float | int | None) -> float | int:
    """The flag ``dest`` if given, else its variable of :data:`ENV_DEFAULTS` if set and not empty, else the
    default; a value out of range (a step delay below 0 or not finite, a log cadence below 1) is refused."""
    env, kind, default, smallest, must_be = ENV_DEFAULTS[dest]
    flag = "--" + dest.replace("_", "-")
    where, raw = (flag, given) if given is not None else (f"${env}", os.environ.get(env))
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value < smallest:
        raise RuntimeConfigError(f"{where} must be {must_be}, got {raw!r}")
    return value


def _run(argv: Sequence[str] | None) -> None:
    args, rest = build_parser().parse_known_args(argv)
    if not args.model_dir:
        raise RuntimeConfigError(f"--model-dir not given and {runtime.MODEL_DIR_ENV} not set")
    for dest in ENV_DEFAULTS:
        setattr(args, dest, _env_default(dest, getattr(args, dest)))
    if args.steps < 1 or args.batch_size < 1 or args.checkpoint_every < 1:
        raise RuntimeConfigError("--steps, --batch-size, --checkpoint-every must be >= 1")
    cfg = _config(rest)
    logging.getLogger("tfk8s_airflow").info("task %s (%s), mode %s", cfg.task_key, cfg.address, args.mode)
    os.makedirs(args.model_dir, exist_ok=True)
    if cfg.task_type == "evaluator":
        from tfk8s_airflow.pod.trainer import eval_replica as evaluator

        print(json.dumps({"evaluation": evaluator.run(cfg, args)}), flush=True)
        return
    # Imported here: both import TensorFlow, and only one is needed.
    if args.mode == "tf1":
        from tfk8s_airflow.pod.trainer import tf1 as impl  # noqa: PLC0415
    else:
        from tfk8s_airflow.pod.trainer import tf2 as impl  # type: ignore[no-redef]  # noqa: PLC0415
    metrics = impl.train(cfg, args)
    if metrics is None:
        return
    from tfk8s_airflow.pod.trainer.state import write_metrics  # noqa: PLC0415

    if args.heldout:
        from tfk8s_airflow.pod.trainer.evaluate import evaluate  # noqa: PLC0415
        from tfk8s_airflow.pod.trainer.inputs import split_files  # noqa: PLC0415

        metrics["heldout"] = evaluate(args.model_dir, split_files(args.heldout))
    print(json.dumps({"metrics": write_metrics(args.model_dir, **metrics)}), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return runtime.run_main(lambda: _run(argv))


if __name__ == "__main__":
    sys.exit(main())
