"""Shared pytest fixtures: real Airflow, and devstack servers (Kubernetes, HDFS, GlusterFS)."""
from tests.fixtures.airflow import *  # noqa: F401,F403  (sets AIRFLOW_HOME before airflow is imported)
from tests.fixtures.k8s import *  # noqa: F401,F403
from tests.fixtures.data import *  # noqa: F401,F403
