"""Only the optional C accelerator lives here; everything else is in setup.cfg.

``optional=True``: where no C compiler or Python headers are found the build goes on
without it, and tfk8s_airflow.staging.checksums uses its pure-Python engines.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("tfk8s_airflow.staging._chunkcrc", ["tfk8s_airflow/staging/_chunkcrc.c"],
                             optional=True, extra_compile_args=["-O2"])])
