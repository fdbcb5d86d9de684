"""The pod side: what runs inside training images, never in Airflow.

:mod:`tfk8s_airflow.pod.runtime` (helpers for the training program), :mod:`tfk8s_airflow.pod.codefetch`
(the code fetcher, an init container), :mod:`tfk8s_airflow.pod.trainer` (the reference trainer,
``python -m tfk8s_airflow.pod.trainer``; the evaluator replica and the evaluation pod's entry point
``python -m tfk8s_airflow.pod.trainer.evaluate``). `.importlinter` keeps it on the standard library,
the ground floor shared with the Airflow side (the pod contract, the errors, the path rule, the
bounded reader, the no-follow file operations, HDFS's checksum, redaction, thread pools) and
itself, TensorFlow for the trainer: the training image installs the package without dependencies.
"""
