"""A training program written the way a Kubeflow TFJob user writes one.

It knows nothing about tfk8s-airflow: it reads ``TF_CONFIG`` (cluster, task,
``environment: cloud``) from the environment, starts a TensorFlow server, and either serves
as a parameter server forever or trains a logistic regression between-graph with
``MonitoredTrainingSession`` (the chief is the chief/master task, else worker 0). It makes
its own synthetic data so that it depends on nothing but TensorFlow and NumPy. The tests
run it unchanged under our TF_CONFIG to prove the TFJob contract holds.
"""

import argparse
import json
import os
import sys

import numpy as np
import tensorflow as tf


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", default="")
    args = parser.parse_args()

    tf_config = json.loads(os.environ["TF_CONFIG"])
    if tf_config.get("environment") != "cloud":
        sys.exit("expected TF_CONFIG environment 'cloud'")
    cluster = tf_config["cluster"]
    task_type = tf_config["task"]["type"]
    task_index = int(tf_config["task"]["index"])

    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=task_type,
                                  task_index=task_index)
    if task_type == "ps":
        server.join()
        return
    chief_type = "chief" if "chief" in cluster else "master" if "master" in cluster else "worker"
    is_chief = task_type == chief_type and task_index == 0

    rng = np.random.RandomState(100 + task_index)
    true_w = np.linspace(-1.0, 1.0, 6).astype(np.float32)

    def sample(n):
        x = rng.randn(n, 6).astype(np.float32)
        return x, (x @ true_w > 0).astype(np.float32)

    test_x, test_y = sample(500)
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        setter = v1.train.replica_device_setter(
            worker_device=f"/job:{task_type}/task:{task_index}", cluster=tf.train.ClusterSpec(cluster))
        with v1.device(setter):
            step = v1.train.get_or_create_global_step()
            w = v1.get_variable("w", [6, 1], initializer=v1.zeros_initializer())
            b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
            x = v1.placeholder(tf.float32, [None, 6])
            y = v1.placeholder(tf.float32, [None])
            logit = tf.reshape(tf.matmul(x, w) + b, [-1])
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logit))
            accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.cast(logit > 0, tf.float32), y), tf.float32))
            train = v1.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
        hooks = [v1.train.StopAtStepHook(last_step=args.steps)]
        # As Estimator does under TF_CONFIG: see only the PS and ourselves, so this worker
        # never waits for a peer worker that has already finished.
        config = v1.ConfigProto(device_filters=["/job:ps", f"/job:{task_type}/task:{task_index}"])
        acc, last, local = 0.0, 0, 0
        with v1.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                               hooks=hooks, config=config,
                                               save_summaries_steps=None,
                                               save_summaries_secs=None) as sess:
            while not sess.should_stop():
                bx, by = sample(32)
                _, last = sess.run([train, step], {x: bx, y: by})
                local += 1
                if local % 20 == 0 and not sess.should_stop():
                    acc = sess.run(accuracy, {x: test_x, y: test_y})
    result = {"task": f"{task_type}-{task_index}", "chief": is_chief, "step": int(last),
              "accuracy": float(acc), "tf_config": os.environ["TF_CONFIG"]}
    print("RESULT " + json.dumps(result), flush=True)
    if args.out:
        with open(os.path.join(args.out, f"{task_type}-{task_index}.json"), "w") as fh:
            json.dump(result, fh)


if __name__ == "__main__":
    main()
