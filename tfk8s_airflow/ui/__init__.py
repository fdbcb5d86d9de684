"""The TF jobs view of the Airflow UI: running and recent jobs, their replicas, progress and logs.

``rows`` assembles a job's row from its run's records (pure); ``sources`` reads them from the
metadata database (and, while nothing newer says how the replicas are, one LIST of the job's
pods); ``app`` is the FastAPI app the plugin mounts, with Airflow's auth manager deciding who
sees what; ``static/`` holds the page.
"""

from tfk8s_airflow.viewpaths import PREFIX

__all__ = ["PREFIX"]
