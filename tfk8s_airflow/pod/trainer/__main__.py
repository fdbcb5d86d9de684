"""``python -m tfk8s_airflow.pod.trainer``: see :mod:`tfk8s_airflow.pod.trainer.cli`."""

import sys

from tfk8s_airflow.pod.trainer.cli import main

sys.exit(main())
