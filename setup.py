"""Only the optional C accelerator lives here; everything else is in setup.cfg.

``optional=True``: where no C compiler or Python headers are found the build goes on
without it, and tfk8s_airflow.staging.checksums and the staging copy pod
(tfk8s_airflow.pod.stagecopy) use their pure-Python engines.

``TFK8S_PURE_PYTHON=1`` leaves the accelerator out, so the wheel is ``py3-none-any`` and
installs on every supported interpreter (the wheel to ship); the sdist always carries the C
source and builds the accelerator wherever it is installed with a compiler.
"""
import os

from setuptools import Extension, setup

PURE = os.environ.get("TFK8S_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes")

setup(ext_modules=[] if PURE else [
    Extension("tfk8s_airflow.pod._chunkcrc", ["tfk8s_airflow/pod/_chunkcrc.c"],
              optional=True, extra_compile_args=["-O2"])])
