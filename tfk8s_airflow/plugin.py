"""The Airflow plugin: makes tfk8s helpers available to DAG authors' templates.

Why a plugin next to the provider: macros (the job name a run will use) are a
plugin feature, and the plugin is how Airflow's UI learns about us.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from tfk8s_airflow.job import naming


def tfk8s_job_name(base: str, run_id: str, group: str = "") -> str:
    """Macro: ``{{ macros.tfk8s.tfk8s_job_name(dag.dag_id, run_id, 'train') }}``."""
    return naming.job_name(base, run_id, group)


class TFK8sPlugin(AirflowPlugin):
    name = "tfk8s"
    macros = [tfk8s_job_name]
