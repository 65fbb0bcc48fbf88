"""Realistic metrics-lake data for tests, the bench and demos, written like the workers write it.

Every flow has `partitions` partitions of one source topic, all sampled every `step_s` seconds (one
slice per step, partitions spread round-robin over `tasks` tasks). Producers write at a per-partition
rate with a daily cycle, a steady growth and Poisson noise; the mirror normally keeps up (caught up most
slices, a few records behind on the others). With `scenario="incidents"` the first flow also has:

- partition 1 STALLED: its position freezes for the middle fifth of the run, then catches up;
- partition 2 REWOUND: halfway through its position jumps back ten slices' worth of records and
  replays them at twice the production rate;
- partition 3 LAGGING: the mirror replicates only 80% of what is produced, so its lag keeps growing;
- partition 4 SILENT: never quite caught up (a slow worker), then no samples at all for a tenth of the
  run (the worker died), which Burrow calls STOP.

Vectorised with numpy and pyarrow: 10M samples take seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from dashboards.spark.lake import append_samples, arrow_schema

SCENARIOS = ("steady", "incidents")
STALLED, REWOUND, LAGGING, SILENT = 1, 2, 3, 4
REWIND_STEPS = 10  # how far back the rewound position jumps, in slices' worth of records
LAGGING_SHARE = 0.8


@dataclass(frozen=True)
class GeneratedLake:
    path: Path
    rows: int
    files: tuple[Path, ...]
    start: datetime
    end: datetime  # time of the last sample


def _positions(end: np.ndarray, rng: np.random.Generator, *, incidents: bool) -> np.ndarray:
    """The mirror's position per (partition, step) given the source end offsets."""
    partitions, steps = end.shape
    behind = np.where(rng.random(end.shape) < 0.7, 0, rng.integers(1, 20, end.shape))
    if incidents and partitions > SILENT:
        behind[SILENT] = rng.integers(1, 20, steps)  # its worker is slow, then dies: never caught up
    position = np.maximum(end - behind, 0)
    if not incidents:
        return position
    if partitions > STALLED:
        first, last = int(steps * 0.4), int(steps * 0.6)
        position[STALLED, first:last] = position[STALLED, first]
    if partitions > REWOUND:
        at = steps // 2
        per_step = max(int(end[REWOUND, -1] // steps), 1)
        replay = max(int(position[REWOUND, at]) - REWIND_STEPS * per_step, 0)
        # Replays at twice the production rate: below its old position for REWIND_STEPS / 2 slices.
        catch_up = np.cumsum(np.full(steps - at, 2 * per_step))
        position[REWOUND, at:] = np.minimum(replay + catch_up - 2 * per_step, end[REWOUND, at:])
    if partitions > LAGGING:
        position[LAGGING] = np.minimum((end[LAGGING] * LAGGING_SHARE).astype(np.int64), end[LAGGING])
    return position


def _silent_mask(partitions: int, steps: int, *, incidents: bool) -> np.ndarray:
    reported = np.ones((partitions, steps), dtype=bool)
    if incidents and partitions > SILENT:
        reported[SILENT, int(steps * 0.7) : int(steps * 0.8)] = False
    return reported


def _flow_table(
    *,
    flow_id: int,
    partitions: int,
    samples: int,
    start_s: float,
    step_s: float,
    tasks: int,
    rng: np.random.Generator,
    incidents: bool,
) -> pa.Table:
    times = start_s + step_s * np.arange(samples)
    day_phase = np.sin(2 * np.pi * (times % 86_400) / 86_400)
    growth = 1 + 0.02 * (times - start_s) / 86_400  # 2% more traffic per day
    base_rate = rng.uniform(50, 500, size=(partitions, 1))  # records/s per partition
    produced = rng.poisson(base_rate * (1 + 0.3 * day_phase) * growth * step_s)
    end = np.cumsum(produced, axis=1).astype(np.int64)
    position = _positions(end, rng, incidents=incidents)
    records = np.diff(position, axis=1, prepend=0).clip(min=0)
    record_size = rng.uniform(200, 2_000, size=(partitions, 1))
    # Age at poll grows with the backlog; the target's ack comes a little after the poll.
    age = rng.gamma(2.0, 15.0, records.shape) + 5.0 + (end - position) / base_rate * 1000.0
    age = np.where(records > 0, age, np.nan)
    latency = age + rng.gamma(2.0, 5.0, records.shape)

    reported = _silent_mask(partitions, samples, incidents=incidents)
    # Time-major order, as slices append them: all partitions of step 0, then step 1, ...
    select = reported.T
    column = lambda values: values.T[select]  # noqa: E731 - one-line reshaper used for every column
    partition_ids = np.broadcast_to(np.arange(partitions)[:, None], (partitions, samples))
    task_ids = partition_ids % tasks
    ts_us = (np.broadcast_to(times, (partitions, samples)) * 1e6).astype(np.int64)
    rows = int(select.sum())
    schema = arrow_schema()
    arrays = {
        "ts": pa.array(column(ts_us), type=schema.field("ts").type),
        "flow_id": pa.array(np.full(rows, flow_id, dtype=np.int64)),
        "flow_name": pa.array(np.full(rows, f"dc1->dc2#{flow_id}", dtype=object)),
        "source_topic": pa.array(np.full(rows, f"orders{flow_id}", dtype=object)),
        "remote_topic": pa.array(np.full(rows, f"dc1.orders{flow_id}", dtype=object)),
        "partition": pa.array(column(partition_ids).astype(np.int32)),
        "task_index": pa.array(column(task_ids).astype(np.int32)),
        "worker": pa.array(np.char.add("worker-", column(task_ids).astype(str)).astype(object)),
        "source_end_offset": pa.array(column(end)),
        "next_offset": pa.array(column(position)),
        "records": pa.array(column(records).astype(np.int64)),
        "bytes": pa.array(
            (column(records) * column(np.broadcast_to(record_size, end.shape))).astype(np.int64)
        ),
        "interval_s": pa.array(np.full(rows, step_s, dtype=np.float64)),
        "record_age_ms": pa.array(column(age), from_pandas=True),
        "replication_latency_ms": pa.array(column(latency), from_pandas=True),
        "partitions": pa.array(np.ones(rows, dtype=np.int32)),
    }
    return pa.Table.from_pydict(arrays, schema=schema)


def generate_lake(
    path: str | Path,
    *,
    flows: int = 2,
    partitions: int = 6,
    samples: int = 1_000,
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
    step_s: float = 5.0,
    seed: int = 7,
    scenario: str = "incidents",
    tasks: int = 2,
    part: str = "part-00000",
) -> GeneratedLake:
    """Write `flows x partitions x samples` samples (minus silent ones) under `path`; see the module doc."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario is one of {SCENARIOS}, not {scenario!r}")
    root = Path(path)
    rng = np.random.default_rng(seed)
    files: list[Path] = []
    rows = 0
    for flow_id in range(1, flows + 1):
        table = _flow_table(
            flow_id=flow_id,
            partitions=partitions,
            samples=samples,
            start_s=start.timestamp(),
            step_s=step_s,
            tasks=tasks,
            rng=rng,
            incidents=scenario == "incidents" and flow_id == 1,
        )
        rows += table.num_rows
        files += append_samples(root, table, part=part)
    end = datetime.fromtimestamp(start.timestamp() + step_s * (samples - 1), tz=UTC)
    return GeneratedLake(path=root, rows=rows, files=tuple(files), start=start, end=end)
