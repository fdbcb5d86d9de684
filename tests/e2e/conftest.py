"""Fixtures of the end-to-end tests: their jobs run on the devstack's real node."""
from __future__ import annotations

import pytest


@pytest.fixture
def k8s_namespace(k8s_namespace, realnode):
    """The test's namespace, whose pods may pull the training image (the registry's pull secret)."""
    realnode.grant_pull(k8s_namespace)
    return k8s_namespace
