"""A rolling upgrade and a scale-down under steady traffic: the longest pause in arrivals on the target.

An exactly_once flow (tasks.max = 2, 4 partitions) runs on two replication workers started as
docs/operations.md tells operators (`--pool=threads -c 4`, production slice, supervisor and lease
settings), beside a metadata worker and beat. Records are produced at a steady rate on cluster A while
each worker in turn is replaced the documented way (a worker of the new version started, then the old
one stopped with SIGTERM), then one of the two is stopped for good (scaling down). A reader on cluster B
notes when every record arrives; the figure is the longest time between two arrivals on one partition,
also measured over a window of steady traffic without any change first (the same-run baseline: what
the machine's load alone costs), and around each hand-over on the handed-over task's partitions. The
longest a record waited (arrival - its source timestamp) is printed beside it: the producer runs on the
same machine, and a pause of the producer is a gap in arrivals but no record's wait. Target: under 1 s, and every record on the target exactly once (exit 1
otherwise).

Needs Redis (REDIS_URL's server, database 13 is used and flushed) and uses a throw-away SQLite database.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.runtime import _redis_url, _setup_django

TARGET_GAP_S = 1.0
PARTITIONS = 4

# Production settings (controlplane/settings_runtime.py defaults), not the tests' short ones.
PRODUCTION_ENV = {
    "MIRRORPLANE_LEASE_TTL_S": "15",
    "MIRRORPLANE_SLICE_SECONDS": "1.0",
    "MIRRORPLANE_SUPERVISE_INTERVAL_S": "2.0",
    "MIRRORPLANE_BACKOFF_MAX_S": "5.0",
    "METRICS_FLUSH_INTERVAL_S": "30",
}


def measure(
    *, rate_per_s: int, steady_s: float, keep: Path | None = None
) -> tuple[dict[str, tuple[float, int, float]], dict[str, float], bool]:
    """{phase: (longest arrival gap in s, its partition, when it began)}, {phase: the longest a record
    waited}, and whether every record arrived exactly once."""
    from bench.brokers import bench_cluster, bench_clusters, stored_cluster
    from harness.runtime import (
        ArrivalRecorder,
        CeleryRuntime,
        SteadyTraffic,
        count_records,
        create_topic,
        mirrored_offsets,
        rolling_upgrade,
        wait_until,
    )

    with (
        _workdir(keep) as tmp,
        bench_clusters(["A", "B"]) as brokers,
    ):
        workdir = Path(tmp)
        _setup_django(workdir)
        from controlplane.flows import services

        a = bench_cluster("A", brokers)
        b = bench_cluster("B", brokers)
        create_topic(a, "orders", PARTITIONS)
        services.flow_create(
            actor=None,
            source=stored_cluster(a),
            target=stored_cluster(b),
            enabled=True,
            topics=["orders"],
            tasks_max=2,
            delivery_guarantee="exactly_once",
        )
        runtime = CeleryRuntime(workdir=workdir, redis_url=_redis_url(), env=PRODUCTION_ENV)
        traffic = recorder = None
        try:
            runtime.start_worker("metadata", queues="metadata")
            runtime.start_worker("w1", queues="replication")
            runtime.start_worker("w2", queues="replication")
            runtime.start_beat()
            traffic = SteadyTraffic(a, "orders", rate_per_s=rate_per_s).start()
            wait_until(lambda: _count(count_records, b), timeout_s=120, what="the first records replicated")
            recorder = ArrivalRecorder(b, "A.orders").start()
            wait_until(lambda: all(recorder.arrivals.values()), timeout_s=60, what="every task replicating")
            time.sleep(1.0)  # the reader caught up with what was replicated before it started
            phases, waits = {}, {}
            started = time.time()
            time.sleep(steady_s)
            phases["steady, no change (baseline)"] = recorder.longest_gap(start=started, end=time.time())
            waits["steady, no change (baseline)"] = recorder.longest_wait_s(start=started, end=time.time())
            started = time.time()
            successors = rolling_upgrade(runtime, ["w1", "w2"], settle_s=steady_s)
            phases["rolling upgrade of 2 workers"] = recorder.longest_gap(start=started, end=time.time())
            waits["rolling upgrade of 2 workers"] = recorder.longest_wait_s(start=started, end=time.time())
            started = time.time()
            runtime.stop(successors[0])
            time.sleep(steady_s)
            phases["scale down 2 -> 1 worker"] = recorder.longest_gap(start=started, end=time.time())
            waits["scale down 2 -> 1 worker"] = recorder.longest_wait_s(start=started, end=time.time())
            produced = traffic.stop()
            traffic = None
            expected = {p: list(range(count)) for p, count in produced.items()}
            exactly_once = _wait_for(lambda: mirrored_offsets(b, "A.orders") == expected, timeout_s=60)
            phases |= _hand_over_gaps(recorder, workdir)
        finally:
            if traffic is not None:
                traffic.stop()
            if recorder is not None:
                recorder.stop()
            runtime.close()
    return phases, waits, exactly_once


_HANDED_OVER = re.compile(
    r"^(\S+ \S+) INFO workers\.replication: task TaskRef\(flow_id=\d+, task_index=(\d+)\): chain \w+ "
    r"handed over",
    re.MULTILINE,
)


def _hand_over_gaps(recorder, workdir: Path) -> dict[str, tuple[float, int, float]]:
    """Per hand-over the workers logged: the longest gap on the handed-over task's partitions (task i of
    2 has partitions i and i + 2) from 1 s before to 3 s after it, which separates what the hand-over
    costs from the stalls of workers it did not touch (a loaded machine)."""
    gaps = {}
    for log in sorted(workdir.glob("w*.log")):
        for stamp, task in _HANDED_OVER.findall(log.read_text(errors="replace")):
            at = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=datetime.UTC)
            t = at.timestamp()
            mine = range(int(task), PARTITIONS, 2)
            gaps[f"hand-over of task {task} ({log.stem})"] = recorder.longest_gap(
                start=t - 1, end=t + 3, partitions=mine
            )
    return gaps


def _workdir(keep: Path | None):
    if keep is None:
        return tempfile.TemporaryDirectory(prefix="mirrorplane-bench-")
    keep.mkdir(parents=True)
    return contextlib.nullcontext(str(keep))


def _count(count_records, cluster) -> int:
    try:
        return count_records(cluster, "A.orders")
    except Exception:  # the remote topic is not created yet
        return 0


def _wait_for(predicate, *, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(1)
    return False


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench upgrade", description=__doc__)
    parser.add_argument("--rate", type=int, default=2000, help="records/s produced on the source")
    parser.add_argument("--steady", type=float, default=5.0, help="seconds of traffic between steps")
    parser.add_argument("--keep", type=Path, help="a new folder to keep the processes' logs in")
    args = parser.parse_args(argv)
    phases, waits, exactly_once = measure(rate_per_s=args.rate, steady_s=args.steady, keep=args.keep)
    print(f"steady traffic: {args.rate:,} records/s over {PARTITIONS} partitions, exactly_once, tasks.max 2")
    for phase, (gap_s, partition, began) in phases.items():
        at = time.strftime("%H:%M:%S", time.gmtime(began)) + f".{int(began % 1 * 1000):03d}"
        waited = f"; longest record wait {waits[phase]:.2f} s" if phase in waits else ""
        print(
            f"{phase:<36} longest arrival gap {gap_s:6.2f} s (partition {partition}, from {at} UTC){waited}"
        )
    print(f"every record on the target exactly once: {'yes' if exactly_once else 'NO'}")
    handovers = [gap_s for phase, (gap_s, _, _) in phases.items() if phase.startswith("hand-over")]
    if handovers:
        print(f"{len(handovers)} hand-over(s): longest gap of a handed-over task {max(handovers):.2f} s")
    worst = max(gap_s for phase, (gap_s, _, _) in phases.items() if "baseline" not in phase)
    ok = exactly_once and worst <= TARGET_GAP_S
    print(f"longest gap {worst:.2f} s: {'ok' if ok else f'MISSED (target {TARGET_GAP_S:g} s, nothing lost)'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
