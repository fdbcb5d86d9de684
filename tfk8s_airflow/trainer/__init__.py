"""Moved to :mod:`tfk8s_airflow.pod.trainer`; this path (``python -m tfk8s_airflow.trainer`` and its
submodules, ``python -m tfk8s_airflow.trainer.evaluate`` too) works until the next release."""

from tfk8s_airflow import _moved

_moved.alias(__name__, "tfk8s_airflow.pod.trainer")
_moved.moved(__name__, "tfk8s_airflow.pod.trainer")
