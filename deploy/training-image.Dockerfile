# The training image: TensorFlow and the pod side of tfk8s-airflow, tfk8s_airflow.pod (the runtime
# helpers tfk8s_airflow.pod.runtime, the code fetcher tfk8s_airflow.pod.codefetch, the reference
# trainer python -m tfk8s_airflow.pod.trainer and the evaluator). The pod side imports only the
# standard library, the ground floor it shares with the Airflow side (contract, exceptions,
# pathrules, untrusted, nofollow, hdfschecksum, redaction, threads) and itself (TensorFlow and numpy for
# the trainer's modes), so the package goes in with --no-deps, and everything else of it (the
# Airflow side) is removed: the image holds the pod side and its ground floor, nothing more.
#
# tfk8s-airflow is on no package index: install the wheel you built, never the name.
#   TFK8S_PURE_PYTHON=1 python3 -m pip wheel --no-deps -w dist .     # dist/tfk8s_airflow-<v>-py3-none-any.whl
#   docker build -f deploy/training-image.Dockerfile -t registry.example.com/ml/trainer:2.21 .
# (From the source tree instead of a wheel: COPY . /src and pip install --no-deps /src.)
# The same image can be [tfk8s] staging_image (the copy pods: python -m tfk8s_airflow.pod.stagecopy).
# The pure-Python wheel has no C CRC32C accelerator, so its copy pods verify at ~11 MiB/s a pod;
# for staging, install a wheel built without TFK8S_PURE_PYTHON on the image's platform (a C
# compiler at build time; ~1 GB/s a pod), docs/staging.md "Copying through pods".
# README.md, "The training image"; tests/packaging/test_training_image.py installs what this
# recipe installs into a bare venv and imports it with the standard library alone.
#
# Build arguments, all optional:
#   PYTHON  the python:<PYTHON>-slim base (default 3.12): 3.11 to 3.13 (the package needs 3.11 or later,
#           TensorFlow 2.21 has wheels up to 3.13).
#   BASE    another base image instead of python:<PYTHON>-slim, e.g. one from your own registry:
#           --build-arg BASE=registry.example.com/base/python:3.12. It needs `python3` on PATH with
#           pip (a venv first on PATH will do), CPython 3.11 to 3.13, and glibc 2.27 or later
#           (TensorFlow's manylinux_2_27 wheels). The devstack builds one from Debian packages
#           (devstack/components/registry/README.md).
#   PIP_INDEX_URL, PIP_EXTRA_INDEX_URL  the package index pip installs TensorFlow from (a mirror);
#           unset, PyPI. Build arguments are kept in the image's history: an index that needs a
#           password wants a build secret, not these.

ARG PYTHON=3.12
ARG BASE=python:${PYTHON}-slim
FROM ${BASE}
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL

# TensorFlow for the reference trainer's tf1/tf2 modes, and TensorBoard (the versions of setup.cfg's
# `tf` extra): TensorFlow 2.21 no longer depends on TensorBoard, and without it `tf.summary` (the
# chief's summaries) fails and a job's TensorBoard pod has no `tensorboard` to run. A job that
# brings its own code (`code:`) needs only python3 and the package.
RUN python3 -m pip install --no-cache-dir "tensorflow-cpu>=2.21,<2.22" "tensorboard>=2.21,<2.22" "numpy>=1.26"

COPY dist/tfk8s_airflow-*-py3-none-any.whl /tmp/wheels/
RUN python3 -m pip install --no-cache-dir --no-deps /tmp/wheels/tfk8s_airflow-*-py3-none-any.whl \
    && rm -rf /tmp/wheels \
    && python3 -c "import pathlib, shutil, tfk8s_airflow; keep = {'__init__.py', 'py.typed', 'contract.py', 'exceptions.py', 'pathrules.py', 'untrusted.py', 'nofollow.py', 'hdfschecksum.py', 'redaction.py', 'threads.py', 'pod'}; [shutil.rmtree(p) if p.is_dir() else p.unlink() for p in pathlib.Path(tfk8s_airflow.__file__).parent.iterdir() if p.name not in keep]" \
    && python3 -c "import tfk8s_airflow.pod.runtime, tfk8s_airflow.pod.codefetch, tfk8s_airflow.pod.trainer.cli, tfk8s_airflow.pod.trainer.dataset, tfk8s_airflow.pod.trainer.state, tfk8s_airflow.pod.stagecopy, tfk8s_airflow.pod.stagesum"

# The trainer's own entry point; a job spec sets its command (docs/runtime.md).
CMD ["python3", "-m", "tfk8s_airflow.pod.trainer", "--help"]
