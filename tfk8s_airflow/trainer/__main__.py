"""``python -m tfk8s_airflow.trainer``: the reference trainer, now ``python -m tfk8s_airflow.pod.trainer``."""

import runpy

runpy.run_module("tfk8s_airflow.pod.trainer", run_name="__main__", alter_sys=True)
