"""Sensors of tfk8s-airflow."""
from tfk8s_airflow.sensors.hdfs import HdfsPartitionSensor
from tfk8s_airflow.sensors.job import TFJobSensor

__all__ = ["TFJobSensor", "HdfsPartitionSensor"]
