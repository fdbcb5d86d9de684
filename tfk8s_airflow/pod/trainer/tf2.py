"""TF2 ParameterServerStrategy training with a ClusterCoordinator (``--mode tf2``).

Why it is written this way:

* PS and worker replicas are plain ``tf.distribute.Server``s that ``join()`` forever; all
  logic runs on the chief, which schedules step functions onto whichever worker is free.
  So in this mode workers are *untracked* (they never exit) and the chief's exit code is
  the job's result, as in TFJob's default success policy.
* The chief builds its cluster resolver from TF_CONFIG *without* the evaluator: an
  evaluator in the cluster spec makes the coordinator wait for it forever.
* The input pipeline is a function run on each worker, reading the CSV files itself
  (``CsvDataset``); ParameterServerStrategy gives every worker the same input context, so
  each worker shuffles with its own random seed instead of taking a fixed slice.
* Restart safety: the global step is a variable in the checkpoint. The chief restores
  the latest checkpoint (``CheckpointManager`` on the model dir) before scheduling, joins
  and saves every ``--checkpoint-every`` steps, so a restarted chief continues from the
  last saved step. A worker that dies is handled by the coordinator (it reschedules the
  lost steps when the worker comes back). A PS that dies loses its variables: the chief
  fails with a retryable error and the whole group must restart from the checkpoint.
* The chief writes TensorBoard scalars (loss, examples/s) after every chunk with
  ``tf.summary.create_file_writer`` under ``<model dir>/train`` (:mod:`.summaries`).
"""

from __future__ import annotations

import argparse
import logging
import time

import tensorflow as tf

from tfk8s_airflow.exceptions import RuntimeConfigError
from tfk8s_airflow.pod import runtime
from tfk8s_airflow.pod.trainer import export
from tfk8s_airflow.pod.trainer import inputs as data
from tfk8s_airflow.pod.trainer import model as mdl
from tfk8s_airflow.pod.trainer.dataset import count_features
from tfk8s_airflow.pod.trainer.state import RunRecorder
from tfk8s_airflow.pod.trainer.summaries import TF2Summaries

log = logging.getLogger("tfk8s_airflow.pod.trainer.tf2")


def serve_forever(cfg: runtime.TFConfig) -> None:
    server = tf.distribute.Server(
        tf.train.ClusterSpec(cfg.training_cluster()), job_name=cfg.task_type,
        task_index=cfg.task_index, protocol="grpc", start=True)
    log.info("%s serving at %s; joining (never returns)", cfg.task_key, cfg.address)
    server.join()


def _dataset_fn(files: list[str], features: int, batch_size: int):
    def dataset_fn(_: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = tf.data.experimental.CsvDataset(files, [tf.float32] * (features + 1), header=True)
        ds = ds.map(lambda label, *x: (tf.stack(x), label))
        return ds.shuffle(4096).repeat().batch(batch_size, drop_remainder=True).prefetch(2)

    return dataset_fn


def train(cfg: runtime.TFConfig, args: argparse.Namespace) -> dict | None:
    if cfg.task_type in ("ps", "worker"):
        serve_forever(cfg)
    if cfg.task_type not in runtime.CHIEF_ROLES:
        raise RuntimeConfigError(f"--mode tf2 runs ps, worker and chief tasks, not {cfg.task_type!r}"
                                 " (the TF2 coordinator lives on the chief)")
    if not cfg.num_tasks("ps") or not cfg.num_tasks("worker"):
        raise RuntimeConfigError("--mode tf2 needs at least one ps and one worker in TF_CONFIG")
    files = data.training_files(args.data, cfg, union_if_missing=True)
    features = count_features(files[0])
    runtime.wait_for_peers(args.peer_timeout, cfg, roles=["ps", "worker"])

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cfg.training_cluster()), task_type=cfg.task_type,
        task_id=cfg.task_index, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = mdl.Model(features, args.hidden, args.seed)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    ckpt = tf.train.Checkpoint(model=model, step=step)
    manager = tf.train.CheckpointManager(ckpt, args.model_dir, max_to_keep=3, checkpoint_name="ckpt")
    if manager.latest_checkpoint:
        ckpt.restore(manager.latest_checkpoint)
        log.info("restored %s", manager.latest_checkpoint)
    start_step = int(step.numpy())
    recorder = RunRecorder(args.model_dir, cfg.task_key, True, "tf2")
    recorder.started(start_step, files=len(files))
    lr = args.learning_rate

    @tf.function
    def train_step(iterator):
        def step_fn(x, y):
            with tf.GradientTape() as tape:
                value = mdl.loss(mdl.logits(x, model.weights()), y)
            grads = tape.gradient(value, list(model.weights().values()))
            for var, grad in zip(model.weights().values(), grads, strict=True):
                var.assign_sub(lr * grad)
            step.assign_add(1)
            return value

        return strategy.run(step_fn, args=next(iterator))

    per_worker = coordinator.create_per_worker_dataset(
        lambda: strategy.distribute_datasets_from_function(
            _dataset_fn(files, features, args.batch_size)))
    iterator = iter(per_worker)

    scheduled = start_step
    loss = float("nan")
    began = time.monotonic()
    summaries = TF2Summaries(args.model_dir) if args.summaries else None
    while scheduled < args.steps:
        if args.stall_after is not None and scheduled >= args.stall_after:
            log.info("chief stalls at global step %d (--stall-after)", scheduled)
            while True:
                time.sleep(3600)
        chunk = min(args.checkpoint_every, args.steps - scheduled)
        results = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(chunk)]
        coordinator.join()
        scheduled += chunk
        loss = float(results[-1].fetch())
        manager.save(checkpoint_number=int(step.numpy()))
        log.info("chief: global step %d loss %.4f (checkpoint saved)", int(step.numpy()), loss)
        recorder.progress(int(step.numpy()), loss)
        rate = (scheduled - start_step) * args.batch_size / max(time.monotonic() - began, 1e-9)
        runtime.report(int(step.numpy()), loss=loss, examples_per_sec=rate, target_step=args.steps)
        if summaries is not None:
            summaries.scalars(int(step.numpy()), loss=loss, examples_per_sec=rate)
        if args.step_delay:
            time.sleep(args.step_delay * chunk)
    if summaries is not None:
        summaries.close()
    final_step = int(step.numpy())
    if manager.latest_checkpoint is None or not manager.latest_checkpoint.endswith(f"-{final_step}"):
        manager.save(checkpoint_number=final_step)
    weights = {n: v.numpy() for n, v in model.weights().items()}
    export.export_saved_model(weights, final_step, args.model_dir)
    recorder.finished(final_step, loss)
    return {"mode": "tf2", "final_step": final_step, "start_step": start_step, "loss": loss}
