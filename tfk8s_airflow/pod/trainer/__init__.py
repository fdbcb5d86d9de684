"""Reference distributed TensorFlow trainer run inside the job's pods.

Why it is in the package: the end-to-end tests (and users trying the plugin) need a real
program that speaks the pods' contract (TF_CONFIG, shard list, model volume, exit codes)
in both supported styles: TF1 between-graph asynchronous PS training and TF2
ParameterServerStrategy. Importing this package imports neither TensorFlow nor Airflow;
the submodules that train (``tf1``, ``tf2``, ``model``, ``export``) import TensorFlow, which
comes with the ``tf`` extra. Run it as ``python -m tfk8s_airflow.pod.trainer --mode tf1|tf2 ...``.
"""
