"""Airflow operators of tfk8s-airflow (thin: specs are built and checked in execute())."""
from tfk8s_airflow.operators.replica import TFReplicaPodOperator
from tfk8s_airflow.operators.setup import TFJobSetupOperator
from tfk8s_airflow.operators.teardown import TFJobTeardownOperator

__all__ = ["TFJobSetupOperator", "TFReplicaPodOperator", "TFJobTeardownOperator"]
