"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point.

Why register as a provider: Airflow then lists tfk8s-airflow with its version in
``airflow providers list`` and the UI, and finds its connection types and
extra links the same way it finds the cncf.kubernetes provider's.
"""

from __future__ import annotations

from tfk8s_airflow import __version__


def get_provider_info() -> dict:
    return {
        "package-name": "tfk8s-airflow",
        "name": "TensorFlow on Kubernetes (tfk8s)",
        "description": "Distributed TensorFlow parameter-server/worker jobs on Kubernetes, "
                       "with data staged from HDFS or GlusterFS.",
        "versions": [__version__],
        "integrations": [{
            "integration-name": "TensorFlow on Kubernetes",
            "external-doc-url": "https://www.tensorflow.org/guide/distributed_training",
            "tags": ["software"],
        }],
        # Listed by `airflow providers links`; the api-server shows each from the XCom the task stored.
        "extra-links": ["tfk8s_airflow.links.TensorBoardLink", "tfk8s_airflow.links.ReplicaLogLink"],
    }
