"""Shared pytest fixtures: devstack servers (real Kubernetes, HDFS, GlusterFS)."""
from tests.fixtures.k8s import *  # noqa: F401,F403
from tests.fixtures.data import *  # noqa: F401,F403
