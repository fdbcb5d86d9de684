"""The TF jobs view of the Airflow UI: running and recent jobs, their replicas, progress and logs.

``rows`` assembles a job's row from its run's records (pure); ``sources`` reads them from the
metadata database (and, while nothing newer says how the replicas are, one LIST of the job's
pods); ``app`` is the FastAPI app the plugin mounts, with Airflow's auth manager deciding who
sees what; ``static/`` holds the page.
"""

#: Where the api-server mounts the view's app (the plugin's ``fastapi_apps``).
PREFIX = "/tfk8s"
