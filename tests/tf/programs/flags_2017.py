"""A distributed TensorFlow program written the way programs of 2017 were.

It knows nothing about tfk8s-airflow or TF_CONFIG: the cluster comes from the command line
(``--ps_hosts --worker_hosts --job_name --task_index``), variables are placed with
``replica_device_setter`` (between-graph replication), and the session has no device
filters, so every worker's session needs every task of the cluster to answer. Worker 0 is
the chief. That is the shape behind the straggler reports of TonY and TFJob users: a worker
that reaches its session after the chief finished waits for the chief's server forever.

``--late_until FILE`` makes a non-chief worker start its session only once FILE exists (the
chief writes it when it is done) and the chief's server no longer answers, which reproduces
that late worker on purpose.
"""

import argparse
import os
import socket
import sys
import time

import numpy as np
import tensorflow as tf


def _answers(address):
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps_hosts", required=True)
    parser.add_argument("--worker_hosts", required=True)
    parser.add_argument("--job_name", required=True)
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--train_steps", type=int, default=200)
    parser.add_argument("--model_dir", default="")
    parser.add_argument("--late_until", default="")
    args = parser.parse_args()

    cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
    server = tf.distribute.Server(cluster, job_name=args.job_name, task_index=args.task_index)
    if args.job_name == "ps":
        server.join()
        return
    is_chief = args.task_index == 0
    if args.late_until and not is_chief:
        print(f"worker {args.task_index}: waiting for {args.late_until} before starting my session", flush=True)
        chief = args.worker_hosts.split(",")[0]
        while not os.path.exists(args.late_until) or _answers(chief):
            time.sleep(0.5)
        print(f"worker {args.task_index}: creating my session now", flush=True)

    v1 = tf.compat.v1
    rng = np.random.RandomState(args.task_index)
    with tf.Graph().as_default():
        with v1.device(v1.train.replica_device_setter(
                worker_device=f"/job:worker/task:{args.task_index}", cluster=cluster)):
            step = v1.train.get_or_create_global_step()
            w = v1.get_variable("w", [4, 1], initializer=v1.zeros_initializer())
            x = v1.placeholder(tf.float32, [None, 4])
            y = v1.placeholder(tf.float32, [None, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
            train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        hooks = [v1.train.StopAtStepHook(last_step=args.train_steps)]
        with v1.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, hooks=hooks,
                                               save_summaries_steps=None, save_summaries_secs=None) as sess:
            last = 0
            while not sess.should_stop():
                bx = rng.randn(16, 4).astype(np.float32)
                _, last = sess.run([train, step], {x: bx, y: bx.sum(axis=1, keepdims=True)})
    print(f"worker {args.task_index} done at global step {last}", flush=True)
    if is_chief and args.model_dir:
        with open(os.path.join(args.model_dir, "chief.done"), "w") as f:
            f.write(str(last))
    sys.exit(0)


if __name__ == "__main__":
    main()
