"""``python -m tfk8s_airflow.trainer``: see :mod:`tfk8s_airflow.trainer.cli`."""

import sys

from tfk8s_airflow.pod.trainer.cli import main

sys.exit(main())
