"""Old home of the evaluation and promotion operators; kept so existing DAG files import.

Moved in 0.2.0: :mod:`tfk8s_airflow.operators.evaluation` and :mod:`tfk8s_airflow.operators.promotion`.
"""

from tfk8s_airflow.operators.evaluation import TFEvaluateOperator
from tfk8s_airflow.operators.promotion import ModelPromoteOperator

__all__ = ["ModelPromoteOperator", "TFEvaluateOperator"]
