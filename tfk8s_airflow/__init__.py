"""Distributed TensorFlow on Kubernetes from Airflow."""
__version__ = "0.1.0"
