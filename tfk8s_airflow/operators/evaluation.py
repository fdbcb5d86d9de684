"""Evaluation of a trained model as an Airflow task.

Why evaluation runs ``python -m tfk8s_airflow.trainer.evaluate`` in a child
process: TensorFlow stays out of the Airflow task process (and may live in
another interpreter, ``python=``), and the JSON it prints becomes the XCom. The
model and held-out data are read from a path this worker sees (the GlusterFS
volume the pods wrote to). A missing model or a metric below the threshold is a
permanent failure with the evaluator's message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException


class TFEvaluateOperator(BaseOperator):
    """Accuracy of the trained model on held-out files; pushes the result dict.

    :param model_dir: the job's model directory (templated).
    :param heldout: held-out CSV file(s) (templated).
    :param threshold: fail below this accuracy (no promotion of a bad model).
    :param python: interpreter with TensorFlow (default: this one).
    """

    template_fields: Sequence[str] = ("model_dir", "heldout", "threshold")

    def __init__(self, *, model_dir: str, heldout: str | list[str], threshold: float | None = None,
                 python: str | None = None, timeout: float = 600, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model_dir = model_dir
        self.heldout = heldout
        self.threshold = threshold
        self.python = python or sys.executable
        self.timeout = timeout

    def execute(self, context: Any) -> dict[str, Any]:
        files = [self.heldout] if isinstance(self.heldout, str) else list(self.heldout)
        cmd = [self.python, "-m", "tfk8s_airflow.trainer.evaluate", "--model-dir", str(self.model_dir)]
        for f in files:
            cmd += ["--heldout", str(f)]
        if self.threshold not in (None, ""):
            cmd += ["--threshold", str(self.threshold)]
        self.log.info("evaluating: %s", " ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout)
        if proc.stderr.strip():
            self.log.info("%s", proc.stderr.strip()[-4000:])
        if proc.returncode != 0:
            message = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            raise AirflowFailException(f"evaluation of {self.model_dir} failed: {message}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        self.log.info("accuracy %.4f on %d examples (global step %s)", result["accuracy"],
                      result["examples"], result.get("global_step"))
        return result
