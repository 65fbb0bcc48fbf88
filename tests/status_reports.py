"""Status rows as the workers store them, for tests that need a given report: the partition's row and
its task's roll-up (controlplane.status.partition_writes.task_status over the task's stored rows, the rule the
workers apply), so every reader sees what it would see after a worker's slice."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from controlplane.status import partition_writes
from controlplane.status.models import FlowPartitionStatus, FlowTaskStatus


def stored_report(**fields) -> FlowPartitionStatus:
    """Store one partition's row (`fields` as FlowPartitionStatus takes them; `flow`, `topic`, `partition`
    and `observed_at` required) and rebuild its task's roll-up. Unless `task_index` is given, the row gets a
    task of its own (index = its partition), so its age is its own, as with a task per partition."""
    fields.setdefault("task_index", fields["partition"])
    fields.setdefault("remote_topic", fields["topic"])
    key = {name: fields.pop(name) for name in ("flow", "topic", "partition")}
    row, _ = FlowPartitionStatus.objects.update_or_create(**key, defaults=fields)
    task_rollup_rebuild(flow_id=row.flow_id, task_index=row.task_index)
    return row


def task_rollup_rebuild(*, flow_id: int, task_index: int) -> FlowTaskStatus:
    """The task's roll-up of its stored rows, reported when its newest row was."""
    rows = list(FlowPartitionStatus.objects.filter(flow_id=flow_id, task_index=task_index))
    at = max(row.observed_at for row in rows)
    errors = [row.last_error for row in rows if row.last_error]
    task = partition_writes.task_status(
        [partition_writes.StatusFigures.of_row(row) for row in rows],
        flow_id=flow_id,
        task_index=task_index,
        task_error=errors[0] if errors else None,
        at=at,
    )
    task.rows_current_at = min(row.observed_at for row in rows)
    FlowTaskStatus.objects.filter(flow_id=flow_id, task_index=task_index).delete()
    task.save()
    return task


@contextmanager
def status_rows_read(table: str = "controlplane_flowpartitionstatus") -> Iterator[dict[str, int]]:
    """Rows returned by the statements that read `table` (partition status rows unless told) meanwhile
    (`rows`: the cursors' row counts; a server-side cursor's are not known and count 0, `statements`
    counts them all)."""
    read = {"rows": 0, "statements": 0}

    def count(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if table in sql and sql.lstrip().upper().startswith("SELECT"):
            read["statements"] += 1
            read["rows"] += max(context["cursor"].rowcount, 0)
        return result

    with connection.execute_wrapper(count):
        yield read
