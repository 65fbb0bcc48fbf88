"""A flow through the Celery runtime against the standalone engine, in the same run; 2 workers against 1.

1 KB records over 4 partitions, pre-filled on embedded cluster A, copied to B. The engine figure is
`bench.engine_vs_raw.engine_copy` (one MirrorSourceTask in this process). The runtime figure is a
stored flow run by real `celery worker` processes (solo pool, production slice length) and beat, timed
from the first persisted progress to the last record's persisted position (the positions the workers
store after every slice), so worker start-up is not counted, as the engine's is not. Targets:
runtime/engine >= 0.8; the 2-worker ratio is reported (tasks.max = 2, one task per worker).

Needs Redis (REDIS_URL's server, database 13 is used and flushed) and uses a throw-away SQLite database.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench.engine_vs_raw import Measurement, Scenario, engine_copy, fill_source

TARGET_RATIO = 0.8
VALUE_BYTES = 1024
BENCH_REDIS_DB = 13


def _setup_django(workdir: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'bench.sqlite3'}"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


@contextlib.contextmanager
def scratch_database() -> Iterator[None]:
    """Django on a throw-away database next to DATABASE_URL's (Django's test database machinery:
    `test_<name>`, migrated), destroyed when the block ends."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from django.db import connection

    database = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        yield
    finally:
        connection.creation.destroy_test_db(database, verbosity=0)


def _redis_url(db: int = BENCH_REDIS_DB) -> str:
    import redis
    from django.conf import settings

    url = settings.REDIS_URL.rsplit("/", 1)[0] + f"/{db}"
    redis.Redis.from_url(url).flushdb()
    return url


class TooFewRecords(Exception):
    """The measurement had no time to measure."""


def runtime_copy(
    *, source, target, topic: str, scenario: Scenario, workers: int, workdir: Path
) -> Measurement:
    from django.db.models import Sum

    from bench.brokers import stored_cluster
    from controlplane.flows import services
    from controlplane.status.models import FlowTaskStatus
    from harness.runtime import CeleryRuntime, wait_until

    clusters = {config.alias: stored_cluster(config) for config in (source, target)}
    flow = services.flow_create(
        actor=None,
        source=clusters[source.alias],
        target=clusters[target.alias],
        enabled=True,
        topics=[topic],
        tasks_max=workers,
    )
    run_dir = workdir / f"{workers}-workers"
    run_dir.mkdir()
    runtime = CeleryRuntime(
        workdir=run_dir,
        redis_url=_redis_url(),
        lease_ttl_s=15,
        env={"MIRRORPLANE_SLICE_SECONDS": "1.0", "MIRRORPLANE_SUPERVISE_INTERVAL_S": "1.0"},
    )

    def replicated() -> int:
        # the tasks' roll-ups: every slice (a partition's own row waits for its refresh interval)
        total = FlowTaskStatus.objects.filter(flow=flow).aggregate(total=Sum("position"))["total"]
        return total or 0

    try:
        for index in range(workers):
            runtime.start_worker(f"bench{index}", queues="replication,metadata")
        runtime.start_beat()
        first = wait_until(replicated, timeout_s=120, what="first replicated records", poll_s=0.1)
        started = time.perf_counter()
        wait_until(lambda: replicated() >= scenario.records, timeout_s=600, what="every record", poll_s=0.1)
        seconds = time.perf_counter() - started
    finally:
        runtime.close()
        services.flow_delete(actor=None, flow=flow)
    if first >= scenario.records:
        raise TooFewRecords(
            f"--records {scenario.records:,}: the workers' first status report already showed every "
            "record copied, so nothing was timed; measure with more records (the default is 500,000)"
        )
    # Rate over what was copied after the first progress was seen: the same records/s basis.
    counted = Scenario(scenario.records - first, scenario.value_bytes)
    return Measurement(f"runtime x{workers}", counted, seconds)


def run(records: int) -> list[Measurement]:
    from bench.brokers import bench_cluster, bench_clusters

    scenario = Scenario(records, VALUE_BYTES)
    with (
        tempfile.TemporaryDirectory(prefix="mirrorplane-bench-") as tmp,
        bench_clusters(["A", "B"]) as brokers,
    ):
        workdir = Path(tmp)
        _setup_django(workdir)
        source = bench_cluster("A", brokers)
        target = bench_cluster("B", brokers)
        results = []
        fill_source(source, "bench-engine", scenario)
        results.append(engine_copy(source, target, "bench-engine", scenario))
        for workers in (1, 2):
            topic = f"bench-runtime-{workers}"
            fill_source(source, topic, scenario)
            results.append(
                runtime_copy(
                    source=source,
                    target=target,
                    topic=topic,
                    scenario=scenario,
                    workers=workers,
                    workdir=workdir,
                )
            )
    print(f"{'method':<14}{'records':>10}{'records/s':>12}{'MB/s':>9}{'seconds':>9}")
    for m in results:
        print(
            f"{m.method:<14}{m.scenario.records:>10,}{m.records_per_s:>12,.0f}{m.mb_per_s:>9.1f}{m.seconds:>9.2f}"
        )
    engine, one, two = results
    ratio = one.records_per_s / engine.records_per_s
    verdict = "ok" if ratio >= TARGET_RATIO else f"BELOW the {TARGET_RATIO} target"
    print(f"runtime (1 worker) / engine: {ratio:.2f} ({verdict})")
    print(f"2 workers / 1 worker: {two.records_per_s / one.records_per_s:.2f}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.runtime", description=__doc__)
    # Several seconds per measurement: at ~60k records/s, 200k gave ~2 s after the first progress,
    # where one slice more or less swung the ratio by 0.15.
    parser.add_argument("--records", type=int, default=500_000, help="1 KB records per measurement")
    parser.add_argument("--quick", action="store_true", help="50,000 records (a smoke run)")
    args = parser.parse_args(argv)
    try:
        run(50_000 if args.quick else args.records)
    except TooFewRecords as error:
        parser.error(str(error))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
