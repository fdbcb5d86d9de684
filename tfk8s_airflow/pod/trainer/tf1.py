"""TF1 between-graph asynchronous parameter-server training (``--mode tf1``).

Why it is written this way:

* Every replica builds its own graph; ``replica_device_setter`` (inside
  ``tf.compat.v1.device``: plain ``tf.device`` does not accept a device function) puts the
  variables on the PS tasks round-robin and the compute on this worker.
* The chief is the chief/master task if the cluster has one, else worker 0 (TFJob's rule).
  Only the chief initialises, restores and writes checkpoints (``MonitoredTrainingSession``
  with ``checkpoint_dir`` = the model dir). A restarted chief restores the latest
  checkpoint; a restarted non-chief picks up the global step still held by the PS. Either
  way the global step continues, which ``replicas/<task>.json`` records.
* Session device filters (``/job:ps`` + this task) keep a worker that starts late, or
  restarts after worker 0 has exited, from waiting forever for the departed peer.
* The PS starts its server and blocks in ``join()``: a PS never exits by itself, the
  orchestrator ends it. Workers start their own server *before* waiting for the PS, and
  wait only for the PS (not for other workers, which may already be done).
* A non-chief worker polls (every 0.5 s, bounded by ``--peer-timeout``) until the chief
  has initialised the variables, instead of the session manager's fixed 30 s sleeps.
* After training the chief exports a SavedModel from its final checkpoint (see
  :mod:`.export`) and writes ``metrics.json``.
* The chief writes TensorBoard scalars (loss, examples/s) every ``--log-every`` local steps
  with a ``FileWriter`` under ``<model dir>/train`` (:mod:`.summaries`).
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import tensorflow as tf

from tfk8s_airflow.exceptions import ModelMissingError, PeerTimeoutError
from tfk8s_airflow.pod import runtime
from tfk8s_airflow.pod.trainer import export
from tfk8s_airflow.pod.trainer import inputs as data
from tfk8s_airflow.pod.trainer import model as mdl
from tfk8s_airflow.pod.trainer.state import RunRecorder
from tfk8s_airflow.pod.trainer.summaries import TF1Summaries

log = logging.getLogger("tfk8s_airflow.pod.trainer.tf1")
v1 = tf.compat.v1


def start_server(cfg: runtime.TFConfig) -> tf.distribute.Server:
    return tf.distribute.Server(
        tf.train.ClusterSpec(cfg.training_cluster()), job_name=cfg.task_type,
        task_index=cfg.task_index, protocol="grpc",
        config=runtime.tf1_session_config(cfg.task_type, cfg.task_index), start=True)


def _build_graph(cfg: runtime.TFConfig, features: int, args: argparse.Namespace) -> dict:
    device_fn = v1.train.replica_device_setter(
        worker_device=f"/job:{cfg.task_type}/task:{cfg.task_index}",
        cluster=tf.train.ClusterSpec(cfg.training_cluster()))
    with v1.device(device_fn):
        global_step = v1.train.get_or_create_global_step()
        init = mdl.init_values(features, args.hidden, args.seed)
        with v1.variable_scope("model"):
            weights = {n: v1.get_variable(n, initializer=init[n]) for n in mdl.VAR_NAMES}
        x = v1.placeholder(tf.float32, [None, features], name="x")
        y = v1.placeholder(tf.float32, [None], name="y")
        loss = mdl.loss(mdl.logits(x, weights), y)
        train_op = v1.train.GradientDescentOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step)
    uninitialized = v1.report_uninitialized_variables(v1.global_variables())
    return {"global_step": global_step, "x": x, "y": y, "loss": loss, "train_op": train_op,
            "uninitialized": uninitialized}


def _wait_for_chief_init(target: str, config: object, uninitialized: tf.Tensor,
                         timeout_s: float) -> None:
    """Poll until the chief has initialised (or restored) the variables on the PS.

    A non-chief ``MonitoredTrainingSession`` checks this itself but sleeps 30 s between
    checks, which would idle a worker for most of a short job.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        with v1.Session(target, config=config) as sess:
            missing = sess.run(uninitialized)
        if missing.size == 0:
            return
        if time.monotonic() > deadline:
            raise PeerTimeoutError(
                f"the chief did not initialise the model within {timeout_s:.0f}s "
                f"(still uninitialised: {', '.join(m.decode() for m in missing[:5])})")
        time.sleep(0.5)


def _stall(cfg: runtime.TFConfig, step: int) -> None:
    """``--stall-after``: stop making progress but keep running (a hung session, for tests)."""
    log.info("%s stalls at global step %d (--stall-after)", cfg.task_key, step)
    while True:
        time.sleep(3600)


def train(cfg: runtime.TFConfig, args: argparse.Namespace) -> dict | None:
    """Run this replica; returns the chief's metrics (None on other workers; PS never returns)."""
    server = start_server(cfg)
    if cfg.task_type == "ps":
        log.info("ps %d serving at %s; joining (never returns)", cfg.task_index, cfg.address)
        server.join()
    runtime.wait_for_peers(args.peer_timeout, cfg, roles=["ps"])
    xs, ys = data.load_arrays(data.training_files(args.data, cfg))
    rng = np.random.default_rng(None)  # each replica (and each restart) sees its own order
    recorder = RunRecorder(args.model_dir, cfg.task_key, cfg.is_chief, "tf1")

    with tf.Graph().as_default():
        g = _build_graph(cfg, xs.shape[1], args)
        summaries = TF1Summaries(args.model_dir) if cfg.is_chief and args.summaries else None
        hooks = [v1.train.StopAtStepHook(last_step=args.steps)]
        session_config = runtime.tf1_session_config(cfg.task_type, cfg.task_index)
        if not cfg.is_chief:
            _wait_for_chief_init(server.target, session_config, g["uninitialized"],
                                 args.peer_timeout)
        with v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=cfg.is_chief,
            checkpoint_dir=args.model_dir if cfg.is_chief else None,
            save_checkpoint_steps=args.checkpoint_every if cfg.is_chief else None,
            save_summaries_steps=None, save_summaries_secs=None, log_step_count_steps=None,
            hooks=hooks, config=session_config,
        ) as sess:
            step = start_step = int(sess.run(g["global_step"]))
            log.info("%s starts at global step %d", cfg.task_key, start_step)
            recorder.started(start_step, examples=int(len(ys)))
            loss, local_steps = float("nan"), 0
            began = time.monotonic()
            while not sess.should_stop():
                idx = rng.integers(0, len(ys), size=args.batch_size)
                _, loss, step = sess.run([g["train_op"], g["loss"], g["global_step"]],
                                         feed_dict={g["x"]: xs[idx], g["y"]: ys[idx]})
                local_steps += 1
                if local_steps % args.log_every == 0:
                    log.info("%s global step %d loss %.4f", cfg.task_key, step, loss)
                    recorder.progress(step, loss)
                    rate = local_steps * args.batch_size / max(time.monotonic() - began, 1e-9)
                    runtime.report(int(step), loss=float(loss), examples_per_sec=rate, target_step=args.steps)
                    if summaries is not None:
                        summaries.scalars(int(step), loss=float(loss), examples_per_sec=rate)
                    if args.stall_after is not None and step >= args.stall_after:
                        _stall(cfg, step)  # after a report: the last step anyone saw is where it stopped
                if args.step_delay:
                    time.sleep(args.step_delay)
        if summaries is not None:
            summaries.close()
    final_step = int(step)  # as fetched with the last train op: may lag by one
    weights = None
    if cfg.is_chief:
        # MonitoredTrainingSession saved a final checkpoint on close; export from it.
        checkpoint = export.latest_checkpoint(args.model_dir)
        if checkpoint is None:
            raise ModelMissingError(f"the chief finished but wrote no checkpoint into {args.model_dir}")
        weights, final_step = export.weights_from_checkpoint(checkpoint)
    recorder.finished(final_step, float(loss), local_steps=local_steps)
    log.info("%s done at global step %d (ran %d steps, loss %.4f)", cfg.task_key, final_step,
             local_steps, loss)
    if weights is None:
        return None
    export.export_saved_model(weights, final_step, args.model_dir)
    return {"mode": "tf1", "final_step": final_step, "start_step": start_step,
            "loss": float(loss), "local_steps": local_steps}
