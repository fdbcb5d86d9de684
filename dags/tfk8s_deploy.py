"""Deploy each newly promoted model: a DAG scheduled on the model Asset, not on a clock.

``tfk8s_retrain_daily``'s promote task emits an event on ``tfk8s-ctr-model`` only when a model
beat the serving one (extra: version, metric, value, path, previous). This DAG runs once per
such event and "deploys" it: here it records the version in ``serving/deployed.json`` on the
volume, where a real deployment would roll out a serving job.
"""
from __future__ import annotations

import json
import os
import tempfile

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Asset

from tfk8s_airflow.assetnames import volume_uri

VOLUME = os.environ.get("TFK8S_GLUSTER_MOUNT", "/mnt/tfk8s-gluster")
ROOT = os.environ.get("TFK8S_ROOT") or f"{VOLUME}/tfk8s"
MODEL = Asset(name="tfk8s-ctr-model", uri=volume_uri(f"{ROOT}/serving"))  # tfk8s_retrain.py's


def deploy(**context):
    events = context["triggering_asset_events"][MODEL]
    newest = max(events, key=lambda e: e.timestamp)
    model = dict(newest.extra)
    target = os.path.join(ROOT, "serving", "deployed.json")
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".deployed.")
    with os.fdopen(fd, "w") as fh:
        json.dump({"version": model["version"], "value": model["value"], "path": model["path"]}, fh)
    os.replace(tmp, target)
    print(f"deployed model {model['version']} ({model['metric']} {model['value']:.4f}) from {model['path']}")
    return model


with DAG("tfk8s_deploy_model", schedule=[MODEL], start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False, tags=["tfk8s", "deploy"], doc_md=__doc__):
    PythonOperator(task_id="deploy", python_callable=deploy)
