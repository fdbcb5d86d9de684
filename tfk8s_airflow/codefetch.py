"""Moved to :mod:`tfk8s_airflow.pod.codefetch`; this path (``python -m tfk8s_airflow.codefetch``
too) works until the next release."""

import runpy
import sys

if __name__ == "__main__":
    runpy.run_module("tfk8s_airflow.pod.codefetch", run_name="__main__", alter_sys=True)
else:
    from tfk8s_airflow import _moved
    from tfk8s_airflow.pod import codefetch

    _moved.moved(__name__, codefetch.__name__)
    sys.modules[__name__] = codefetch
