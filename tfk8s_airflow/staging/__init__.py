"""The data engine: list HDFS or GlusterFS input, copy it onto the volume verified, shard it, write the manifest.

No Airflow in this package: the operators in :mod:`tfk8s_airflow.operators.staging` are thin.
"""
