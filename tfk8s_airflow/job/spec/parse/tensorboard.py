"""``tensorboard``: a TensorBoard pod for the job's summaries, served on the job's Service."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from tfk8s_airflow.contract import MODEL_VOLUME
from tfk8s_airflow.job.spec import fields as v
from tfk8s_airflow.job.spec.model import TensorBoard, Volume
from tfk8s_airflow.job.spec.parse.reader import Reader
from tfk8s_airflow.pathrules import has_parent_segment

_KEYS = ("enabled", "log_dir", "image", "port")
DEFAULT_TENSORBOARD_PORT = 6006


def tensorboard(r: Reader, d: Mapping[str, Any], vols: tuple[Volume, ...], job_port: int) -> TensorBoard | None:
    raw = d.get("tensorboard")
    if raw is None or raw is False:
        return None
    if raw is True:
        raw = {"enabled": True}
    if not isinstance(raw, Mapping):
        r.add("tensorboard", f"must be true or a mapping, got {v.show(raw)}", "write tensorboard: {enabled: true}")
        return None
    r.unknown(raw, _KEYS, "tensorboard.")
    if not r.boolean(raw, "enabled", "tensorboard.enabled", True):
        return None
    model = next((vol for vol in vols if vol.name == MODEL_VOLUME), None)
    log_dir = r.string(raw, "log_dir", "tensorboard.log_dir", model.mount_path if model else None)
    if not log_dir:
        r.add("tensorboard.log_dir", "is required when the job has no `model` volume",
              "add log_dir: the path inside the pods where the program writes its summaries")
        return None
    if not log_dir.startswith("/") or has_parent_segment(log_dir):
        r.add("tensorboard.log_dir", f"must be an absolute path without '..', got {v.show(log_dir)}",
              "write log_dir: /model (a path inside the pods)")
        return None
    norm = posixpath.normpath(log_dir)
    if not any(norm == vol.mount_path.rstrip("/") or norm.startswith(vol.mount_path.rstrip("/") + "/")
               for vol in vols if vol.kind in ("host_path", "pvc")):
        r.add("tensorboard.log_dir", f"{v.show(log_dir)} is under none of the job's host_path or pvc volumes, "
              "so TensorBoard could not read what the replicas write there",
              "point log_dir under the mount_path of the model volume (or another shared volume)")
        return None
    image = r.string(raw, "image", "tensorboard.image")
    if image:
        r.extend(v.check_image(image, "tensorboard.image"))
    port = r.integer(raw, "port", "tensorboard.port", DEFAULT_TENSORBOARD_PORT, low=1, high=65535)
    if port == job_port:
        r.add("tensorboard.port", f"{port} is the replicas' TensorFlow port as well",
              f"write port: {DEFAULT_TENSORBOARD_PORT}")
    return TensorBoard(log_dir=norm, image=image or None, port=port)
