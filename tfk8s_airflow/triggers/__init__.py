"""Triggers (run in the triggerer; importable from the installed package)."""
from tfk8s_airflow.triggers.job import TFJobTrigger

__all__ = ["TFJobTrigger"]
