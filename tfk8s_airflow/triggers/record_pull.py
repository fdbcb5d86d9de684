"""The job record of a trigger started in the triggerer: pulled once per job and triggerer process.

Why: a job of N replicas is N + 1 triggers that start within a second or two, and each needs
the setup task's XCom ``job`` (about 150 bytes per replica: 75 KB at 512). Pulled by each, that is
N responses of the whole record through the triggerer's supervisor (38 MB at 512 replicas), which
sends each response to its trigger runner synchronously while the runner may be writing its
triggers' logs back to it: at 512 replicas both sides blocked, and the triggerer stopped.

So setup also pushes ``job_id`` (a few bytes, new whenever setup runs again). A trigger pulls
that; the first trigger of a job pulls the record and every other trigger of the job in the same
process takes it from here.
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from tfk8s_airflow.exceptions import RecordError
from tfk8s_airflow.job.run.records import JOB_ID_KEY, JobRecord

__all__ = ["pull_record"]

#: Records kept (75 KB each at 512 replicas): the jobs whose triggers a triggerer starts at one time.
CACHE_SIZE = 64

_FIX = "fix: the replica tasks and the sensor must follow the job's setup task, as tf_job() builds them"

_records: OrderedDict[str, JobRecord] = OrderedDict()
_pending: dict[tuple[int, str], asyncio.Future[JobRecord]] = {}


async def pull_record(ti: Any, source: str) -> JobRecord:
    """The record of ``source`` (the setup task) for the trigger of task instance ``ti``."""
    key = await ti.axcom_pull(task_ids=source, key=JOB_ID_KEY, map_indexes=-1)
    if not isinstance(key, str) or not key:
        raise RecordError(f"task {source} pushed no XCom {JOB_ID_KEY!r} ({_FIX})")
    if key in _records:
        _records.move_to_end(key)
        return _records[key]
    loop = asyncio.get_running_loop()
    slot = (id(loop), key)
    pending = _pending.get(slot)
    if pending is not None:
        try:
            return await asyncio.shield(pending)
        except Exception:  # noqa: BLE001 - the first puller failed or was cancelled: pull for ourselves
            return await _pull(ti, source)
    future: asyncio.Future[JobRecord] = loop.create_future()
    _pending[slot] = future
    try:
        record = await _pull(ti, source)
    except BaseException as exc:
        future.set_exception(RecordError(f"pulling the job record of {source} failed: {exc!r}"))
        future.exception()  # retrieved: no "never retrieved" warning when nobody waited
        raise
    finally:
        _pending.pop(slot, None)
    if record.job_id == key:  # setup did not run again between the two pulls
        _records[key] = record
        while len(_records) > CACHE_SIZE:
            _records.popitem(last=False)
    future.set_result(record)
    return record


async def _pull(ti: Any, source: str) -> JobRecord:
    value = await ti.axcom_pull(task_ids=source, key="job", map_indexes=-1)
    if value is None:
        raise RecordError(f"task {source} pushed no XCom 'job' ({_FIX})")
    return JobRecord.from_xcom(value)
