"""The job model: a frozen spec, its names, TensorFlow wiring and Kubernetes objects, and the judge.

Pure: no Airflow and no Kubernetes client in this package, so the CLI, the operators and the
tests all build and judge a job the same way.
"""
