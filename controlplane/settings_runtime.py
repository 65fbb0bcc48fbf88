"""Settings of the Celery runtime (workers, beat) and the metrics lake; part of the one settings module.

`controlplane/settings.py` star-imports this module; every value comes from the environment:

| variable | default | meaning |
|---|---|---|
| REDIS_URL | redis://127.0.0.1:6379/0 | Celery broker and replication leases (read in settings.py) |
| MIRRORPLANE_LEASE_TTL_S | 15 | a (flow, task) lease not renewed this long is taken over by another worker |
| MIRRORPLANE_SLICE_SECONDS | 1.0 | wall time of one replication slice |
| MIRRORPLANE_SLICE_MAX_RECORDS | 100000 | records of one replication slice at most |
| MIRRORPLANE_SUPERVISE_INTERVAL_S | 2.0 | how often the supervisor (in beat) checks every flow |
| MIRRORPLANE_REBALANCE_SLICES | 60 | a task chain stays on its worker this many slices, then moves if that evens its pool |
| MIRRORPLANE_BACKOFF_MAX_S | 5.0 | longest pause between failing slices (kept below the lease TTL) |
| MIRRORPLANE_CLUSTER_TIMEOUT_S | 5.0 | bound of each metadata/admin request and reachability probe of a cluster |
| MIRRORPLANE_CLUSTER_PROBE_INTERVAL_S | 5.0 | a cluster that answered this recently is not probed again |
| MIRRORPLANE_CLUSTER_FAILURES_TO_FAULT | 2 | failed probes in a row that open a cluster's breaker and fault its flows |
| MIRRORPLANE_CLUSTER_BACKOFF_MAX_S | 60 | longest pause between trial probes of an unreachable cluster (5 s, doubling) |
| MIRRORPLANE_PRESENCE_INTERVAL_S | 5 | workers and beat announce themselves this often (seen = within 3 intervals) |
| MIRRORPLANE_STALE_AFTER_S | 3 x slice + supervise interval + backoff max (10 by default) | a live figure observed longer ago than this is STALE, shown with its age, never healthy (docs/lag.md) |
| MIRRORPLANE_SCHEMA_WAIT_ERROR_S | 30 | a partition held at a record whose schema is not on the target yet reports a `schema` error once it held this long (docs/schemas.md) |
| MIRRORPLANE_STATUS_REFRESH_S | 10 | a partition's status row whose positions, counts or lag moved is rewritten once it is this old (its state or error: at once; unchanged: never); the task's roll-up row, written every slice, keeps it fresh (docs/scale.md) |
| METRICS_FLUSH_INTERVAL_S | 30 | a worker writes its buffered metric samples to the lake at least this often |
| METRICS_FLUSH_ROWS | 20000 | ... or when this many samples are buffered |
| METRICS_TOPIC_ROWS_ABOVE | 500 | a task of more partitions writes one lake row per topic per slice, not one per partition |
| METRICS_RENDER_INTERVAL_S | 5 | while /metrics is scraped, the metadata worker renders its families this often and scrapes are answered with them (0: every scrape reads the database itself; docs/metrics.md) |
| METRICS_RENDER_MAX_AGE_S | 3 x METRICS_RENDER_INTERVAL_S | families rendered ahead longer ago than this are not served: the scrape reads the database itself |
| REPORTS_INTERVAL_S | 300 | beat queues a report run when the last one was requested this long ago |
| REPORTS_RUN_TIMEOUT_S | 3600 | an active report run without progress this long is failed (its worker died) |
| MIRRORPLANE_DRILL_INTERVAL_S | 0 (off) | a flow drilled before is drilled again (same groups) once its last drill is this old |
| MIRRORPLANE_OPERATION_LEASE_S | 30 | an operation (failover, failback) whose worker sent no heartbeat this long is resumed by another worker |
| ALERTS_EVALUATE_INTERVAL_S | 10 | beat queues an evaluation of the alert rules this often (docs/alerts.md) |
| ALERTS_HEARTBEAT_MIN_AGE_S | 30 | heartbeat missing: none emitted within max(3 heartbeat intervals, this) |
| ALERTS_OFFSET_SYNC_MAX_LAG_S | 60 | offset syncs stopped: records replicated this long after the newest sync |
| ALERTS_DATA_LOSS_WINDOW_S | 3600 | a data-loss gap alert fires for this long after the gap |
| ALERTS_NOTIFY_TIMEOUT_S | 5 | bound of one notification request (webhook, Slack, SMTP) |
| ALERTS_NOTIFY_RETRIES | 5 | retries of a failed notification, with exponential backoff |
| ALERTS_NOTIFY_BACKOFF_S | 5 | first retry's delay; doubled each retry up to ALERTS_NOTIFY_BACKOFF_MAX_S (300) |
| VERIFY_INTERVAL_S | 10 | beat queues a verification run this often (docs/verification.md) |
| VERIFY_MAX_BYTES_PER_S | 1000000 | bytes/s the verifier may read from both clusters together (its allowance per run: this x the interval) |
| VERIFY_RANGE_RECORDS | 1000 | source offsets per verified range |
| VERIFY_HOT_RECORDS | 100000 | continuous verification starts at most this many offsets behind the end; older (cold) data is sampled |
| VERIFY_COLD_SAMPLES_PER_RUN | 1 | cold ranges sampled per partition per run |
| VERIFY_TIMEOUT_S | 10 | bound of each read of the verifier |
| VERIFY_RUN_BUDGET_S | VERIFY_INTERVAL_S / 2 | a run starts no new batch or round of reads after this long; the next run resumes the rotation |
| VERIFY_BATCH_PARTITIONS | 500 | partitions the verifier reads together (one assignment per cluster per round) |
| READINESS_ALERT_BELOW | 70 | a runnable flow whose failover readiness score is below this fires `readiness_low` |
| READINESS_GRACE_S | 120 | a flow runnable for less than this (at least 3 verification intervals) does not fire `readiness_low` yet |
| READINESS_VERIFICATION_MAX_AGE_S | 300 | a verification older than this counts as stale in the readiness score |
| REPORTS_STATE_DIR | var/reports | the report job's ledger of lake partitions it has read |
| REPORTS_WINDOW_S | 300 | report window (divides a day) |
| REPORTS_WORKER_NIC_MBPS | 10000 | a worker's network capacity (megabits/s) for capacity plans |
| REPORTS_RETENTION_HOURS | 168 | target topics' retention for the disk plan |
| REPORTS_FLEET_WORKERS | 1 | replication workers the fleet capacity plan judges (each pool's plan: its live workers) |
| REPORTS_TASK_MB_PER_S | (none) | one task's measured maximum MB/s, used when no window saturated a task |
| REPORTS_PLAN_MONTHS | 6 | the capacity plan says what to add to last this many months |
"""

from __future__ import annotations

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from replication.schema_hold import SCHEMA_WAIT_ERROR_S

_env = environ.Env()

MIRRORPLANE_LEASE_TTL_S = _env.float("MIRRORPLANE_LEASE_TTL_S", default=15.0)
MIRRORPLANE_SLICE_SECONDS = _env.float("MIRRORPLANE_SLICE_SECONDS", default=1.0)
MIRRORPLANE_SLICE_MAX_RECORDS = _env.int("MIRRORPLANE_SLICE_MAX_RECORDS", default=100_000)
MIRRORPLANE_SUPERVISE_INTERVAL_S = _env.float("MIRRORPLANE_SUPERVISE_INTERVAL_S", default=2.0)
MIRRORPLANE_REBALANCE_SLICES = _env.int("MIRRORPLANE_REBALANCE_SLICES", default=60)
MIRRORPLANE_BACKOFF_MAX_S = _env.float("MIRRORPLANE_BACKOFF_MAX_S", default=5.0)
MIRRORPLANE_CLUSTER_TIMEOUT_S = _env.float("MIRRORPLANE_CLUSTER_TIMEOUT_S", default=5.0)
MIRRORPLANE_CLUSTER_PROBE_INTERVAL_S = _env.float("MIRRORPLANE_CLUSTER_PROBE_INTERVAL_S", default=5.0)
MIRRORPLANE_CLUSTER_FAILURES_TO_FAULT = _env.int("MIRRORPLANE_CLUSTER_FAILURES_TO_FAULT", default=2)
MIRRORPLANE_CLUSTER_BACKOFF_MAX_S = _env.float("MIRRORPLANE_CLUSTER_BACKOFF_MAX_S", default=60.0)
MIRRORPLANE_PRESENCE_INTERVAL_S = _env.float("MIRRORPLANE_PRESENCE_INTERVAL_S", default=5.0)
# A running chain reports every slice, a failing one also waits its backoff, and the supervisor starts a
# missing chain within its interval: three slices more than that without a report means nobody does.
MIRRORPLANE_STALE_AFTER_S = _env.float(
    "MIRRORPLANE_STALE_AFTER_S",
    default=3 * MIRRORPLANE_SLICE_SECONDS + MIRRORPLANE_SUPERVISE_INTERVAL_S + MIRRORPLANE_BACKOFF_MAX_S,
)
MIRRORPLANE_STATUS_REFRESH_S = _env.float("MIRRORPLANE_STATUS_REFRESH_S", default=10.0)
MIRRORPLANE_SCHEMA_WAIT_ERROR_S = _env.float("MIRRORPLANE_SCHEMA_WAIT_ERROR_S", default=SCHEMA_WAIT_ERROR_S)
METRICS_FLUSH_INTERVAL_S = _env.float("METRICS_FLUSH_INTERVAL_S", default=30.0)
METRICS_FLUSH_ROWS = _env.int("METRICS_FLUSH_ROWS", default=20_000)
METRICS_TOPIC_ROWS_ABOVE = _env.int("METRICS_TOPIC_ROWS_ABOVE", default=500)
METRICS_RENDER_INTERVAL_S = _env.float("METRICS_RENDER_INTERVAL_S", default=5.0)
METRICS_RENDER_MAX_AGE_S = _env.float("METRICS_RENDER_MAX_AGE_S", default=3 * METRICS_RENDER_INTERVAL_S)
if METRICS_RENDER_INTERVAL_S < 0 or (
    METRICS_RENDER_INTERVAL_S > 0 and METRICS_RENDER_MAX_AGE_S < METRICS_RENDER_INTERVAL_S
):
    raise ImproperlyConfigured(
        f"METRICS_RENDER_INTERVAL_S={METRICS_RENDER_INTERVAL_S}, METRICS_RENDER_MAX_AGE_S={METRICS_RENDER_MAX_AGE_S}: "
        "the interval is 0 (off) or more seconds, and the max age at least the interval (3 intervals by default)"
    )

MIRRORPLANE_OPERATION_LEASE_S = _env.float("MIRRORPLANE_OPERATION_LEASE_S", default=30.0)
MIRRORPLANE_DRILL_INTERVAL_S = _env.float("MIRRORPLANE_DRILL_INTERVAL_S", default=0.0)

ALERTS_EVALUATE_INTERVAL_S = _env.float("ALERTS_EVALUATE_INTERVAL_S", default=10.0)
ALERTS_HEARTBEAT_MIN_AGE_S = _env.float("ALERTS_HEARTBEAT_MIN_AGE_S", default=30.0)
ALERTS_OFFSET_SYNC_MAX_LAG_S = _env.float("ALERTS_OFFSET_SYNC_MAX_LAG_S", default=60.0)
ALERTS_DATA_LOSS_WINDOW_S = _env.float("ALERTS_DATA_LOSS_WINDOW_S", default=3600.0)
ALERTS_NOTIFY_TIMEOUT_S = _env.float("ALERTS_NOTIFY_TIMEOUT_S", default=5.0)
ALERTS_NOTIFY_RETRIES = _env.int("ALERTS_NOTIFY_RETRIES", default=5)
ALERTS_NOTIFY_BACKOFF_S = _env.float("ALERTS_NOTIFY_BACKOFF_S", default=5.0)
ALERTS_NOTIFY_BACKOFF_MAX_S = _env.float("ALERTS_NOTIFY_BACKOFF_MAX_S", default=300.0)

VERIFY_INTERVAL_S = _env.float("VERIFY_INTERVAL_S", default=10.0)
VERIFY_MAX_BYTES_PER_S = _env.float("VERIFY_MAX_BYTES_PER_S", default=1_000_000.0)
VERIFY_RANGE_RECORDS = _env.int("VERIFY_RANGE_RECORDS", default=1000)
VERIFY_HOT_RECORDS = _env.int("VERIFY_HOT_RECORDS", default=100_000)
VERIFY_COLD_SAMPLES_PER_RUN = _env.int("VERIFY_COLD_SAMPLES_PER_RUN", default=1)
VERIFY_TIMEOUT_S = _env.float("VERIFY_TIMEOUT_S", default=10.0)
VERIFY_RUN_BUDGET_S = _env.float("VERIFY_RUN_BUDGET_S", default=VERIFY_INTERVAL_S / 2)
VERIFY_BATCH_PARTITIONS = _env.int("VERIFY_BATCH_PARTITIONS", default=500)
READINESS_ALERT_BELOW = _env.float("READINESS_ALERT_BELOW", default=70.0)
READINESS_GRACE_S = _env.float("READINESS_GRACE_S", default=120.0)
READINESS_VERIFICATION_MAX_AGE_S = _env.float("READINESS_VERIFICATION_MAX_AGE_S", default=300.0)

REPORTS_INTERVAL_S = _env.float("REPORTS_INTERVAL_S", default=300.0)
REPORTS_RUN_TIMEOUT_S = _env.float("REPORTS_RUN_TIMEOUT_S", default=3600.0)
REPORTS_STATE_DIR = Path(
    _env.str("REPORTS_STATE_DIR", default=str(Path(__file__).resolve().parent.parent / "var" / "reports"))
)
REPORTS_WINDOW_S = _env.int("REPORTS_WINDOW_S", default=300)
REPORTS_WORKER_NIC_MBPS = _env.float("REPORTS_WORKER_NIC_MBPS", default=10_000.0)
REPORTS_RETENTION_HOURS = _env.float("REPORTS_RETENTION_HOURS", default=168.0)
REPORTS_FLEET_WORKERS = _env.int("REPORTS_FLEET_WORKERS", default=1)
REPORTS_TASK_MB_PER_S = _env.float("REPORTS_TASK_MB_PER_S", default=None)
REPORTS_PLAN_MONTHS = _env.int("REPORTS_PLAN_MONTHS", default=6)

REPLICATION_QUEUE = "replication"
METADATA_QUEUE = "metadata"
REPORTS_QUEUE = "reports"
OPERATIONS_QUEUE = "operations"

# Celery (read by workers.app with namespace "CELERY"); the broker URL is REDIS_URL.
CELERY_TASK_DEFAULT_QUEUE = METADATA_QUEUE
CELERY_TASK_ROUTES = {
    "workers.tasks.replicate_slice": {"queue": REPLICATION_QUEUE},
    "workers.tasks.flow_metadata": {"queue": METADATA_QUEUE},
    "dashboards.*": {"queue": REPORTS_QUEUE},
    "workers.reports.*": {"queue": REPORTS_QUEUE},
    "workers.operations.*": {"queue": OPERATIONS_QUEUE},
    "workers.alerts.*": {"queue": METADATA_QUEUE},
    # Bounded by VERIFY_MAX_BYTES_PER_S and one run at a time: a thread of the metadata pool, never
    # replication capacity, and no queue of its own that deployments would have to start consuming.
    "workers.verification.*": {"queue": METADATA_QUEUE},
    "workers.exposition.*": {"queue": METADATA_QUEUE},
}
# Work survives a dead worker through the leases, not through message redelivery: a killed worker's
# chains are restarted by the supervisor once their leases expire. So messages are acknowledged when a
# task starts, and the Redis transport's ack emulation (an `unacked` hash restored after a visibility
# timeout) is off: with it, a worker of the threads pool that loses Redis while tasks run exits with
# "AttributeError: 'NoneType' object has no attribute 'hostname'" (kombu restores the unacked messages
# through a connection it already closed). docs/operations.md has the measurements.
CELERY_TASK_ACKS_LATE = False
CELERY_BROKER_TRANSPORT_OPTIONS = {"ack_emulation": False}
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
# Each worker also listens on its own queue: a chain's next slice goes there, so the clients it cached
# are reused (workers.replication).
CELERY_WORKER_DIRECT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Beat runs the supervisor itself (workers.beat); other periodic jobs (reports) join its schedule.
CELERY_BEAT_SCHEDULER = "workers.beat:SupervisingScheduler"
