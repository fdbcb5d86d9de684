"""Reading a finished dag.test() run: task states and XCom values, for the tests."""
from __future__ import annotations

import json
from typing import Any


def states(dr) -> dict[tuple[str, int], Any]:
    return {(ti.task_id, ti.map_index): ti.state for ti in dr.get_task_instances()}


def xcom(dr, task_id: str, key: str = "return_value") -> Any:
    """The XCom value a task pushed in this run (JSON-decoded), or None."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    ti = next(t for t in dr.get_task_instances() if t.task_id == task_id)
    with create_session() as session:
        row = session.query(XComModel).filter_by(dag_id=dr.dag_id, run_id=dr.run_id, task_id=task_id,
                                                 key=key, map_index=ti.map_index).first()
        value = None if row is None else row.value
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def xcom_at(dr, task_id: str, map_index: int, key: str = "return_value") -> Any:
    """The XCom a mapped task instance pushed in this run (JSON-decoded), or None."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    with create_session() as session:
        row = session.query(XComModel).filter_by(dag_id=dr.dag_id, run_id=dr.run_id, task_id=task_id,
                                                 key=key, map_index=map_index).first()
        value = None if row is None else row.value
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
