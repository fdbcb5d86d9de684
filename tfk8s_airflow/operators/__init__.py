"""Airflow operators of tfk8s-airflow (thin: specs are built and checked in execute())."""
from tfk8s_airflow.operators.evaluation import TFEvaluateOperator
from tfk8s_airflow.operators.promotion import ModelPromoteOperator
from tfk8s_airflow.operators.replica import TFReplicaPodOperator, TFReplicaWorkerStartPodOperator
from tfk8s_airflow.operators.setup import TFJobSetupOperator
from tfk8s_airflow.operators.staging import GlusterFSStageOperator, HdfsStageOperator
from tfk8s_airflow.operators.teardown import TFJobTeardownOperator

__all__ = ["TFJobSetupOperator", "TFReplicaPodOperator", "TFReplicaWorkerStartPodOperator", "TFJobTeardownOperator",
           "HdfsStageOperator", "GlusterFSStageOperator", "TFEvaluateOperator", "ModelPromoteOperator"]
