"""Moved to :mod:`tfk8s_airflow.pod.runtime`; this path works until the next release."""

import sys

from tfk8s_airflow import _moved
from tfk8s_airflow.pod import runtime

_moved.moved(__name__, runtime.__name__)
sys.modules[__name__] = runtime
