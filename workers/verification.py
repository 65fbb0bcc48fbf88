"""Continuous verification on the `metadata` queue, dispatched by beat every VERIFY_INTERVAL_S.

One run at a time (a Redis lock; queued runs expire after one interval): for every runnable flow whose
clusters answer, read the new offset syncs and every partition's ends in a few batched ListOffsets
requests, plan each partition (`replication.verification.partition_turn`), and verify those with
something new in rotation (never checked first, then least recently checked), many partitions on one
assignment per cluster (`replication.cluster_ports.FlowVerification`), while the run's budgets last: bytes
(VERIFY_MAX_BYTES_PER_S x VERIFY_INTERVAL_S) and time (VERIFY_RUN_BUDGET_S), both shared by every flow,
flows taken in turn. The next run resumes where this one stopped. The run's outcome for a flow is stored
in one transaction (`controlplane.assurance.verification.verification_run_record`: one upsert of the rows
that changed, the events of new mismatches); a partition with nothing new costs nothing but its share of
the batched ListOffsets. What a run leaves waiting, the flow's backlog (`replication.verification_backlog`),
is stored with it, so a verifier that reads less than the flow writes shows as behind. It also observes what the failover readiness score needs (groups active on the
target, topic parity; at most every ASSURANCE_INTERVAL_S per flow). Each run logs the partitions it
checked, what it read and the CPU it used, which is the verifier's cost.
"""

from __future__ import annotations

import datetime
import itertools
import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections

from controlplane.assurance import verification
from controlplane.flows.clusters import clusters
from controlplane.status import runtime
from controlplane.status.runtime import FlowSpec
from replication.cluster_ports import FlowVerification
from replication.logonce import warn_once
from replication.verification import (
    ByteBudget,
    PartitionOutcome,
    PartitionTurn,
    RunClock,
    VerificationLimits,
    rotation,
)
from replication.verification_backlog import BEHIND_S, run_backlog
from workers import context
from workers.app import app
from workers.cadence import Cadence
from workers.leases import one_at_a_time

log = logging.getLogger(__name__)

# Groups on the target and topic parity change rarely and cost a few admin requests (2-3 s on the
# embedded broker): observed at most this often per flow.
ASSURANCE_INTERVAL_S = 60.0
_runs = itertools.count()
# The flow this process's next run starts with: the first one the last run did not reach once its budget
# was spent, else the one after the last run's first, so an allowance spent early does not starve the same
# flows and a run over its time budget never leaves the flows after it to a rotation by one.
_next_flow_id = 0
_verifiers: dict[int, tuple[str, FlowVerification]] = {}
_observed: dict[int, float] = {}  # flow id -> when its readiness observations were last made
_verifiers_lock = threading.Lock()


@app.task(name="workers.verification.verify_flows", ignore_result=True)
def verify_flows() -> None:
    close_old_connections()
    with one_at_a_time(
        context.leases(), "verification", ttl_s=max(60, 6 * settings.VERIFY_INTERVAL_S)
    ) as mine:
        if not mine:
            log.info("a verification run is going on elsewhere; skipping this one")
            return
        run_verification(run=next(_runs))


# Beat: a run every VERIFY_INTERVAL_S; True when one was queued.
dispatch_verification = Cadence(verify_flows, lambda: settings.VERIFY_INTERVAL_S).dispatch


def _verifier(spec: FlowSpec) -> FlowVerification:
    with _verifiers_lock:
        cached = _verifiers.get(spec.flow_id)
        if cached is not None and cached[0] == spec.config_version:
            return cached[1]
        if cached is not None:
            cached[1].close()
        verifier = clusters().flow_verifier(
            flow=spec.flow,
            source=spec.source,
            target=spec.target,
            known_aliases=spec.known_aliases,
            timeout_s=settings.VERIFY_TIMEOUT_S,
            schema_ids=lambda: runtime.rewritten_schema_ids(
                flow_id=spec.flow_id, mode=spec.flow.schemas_sync_mode
            ),
        )
        _verifiers[spec.flow_id] = (spec.config_version, verifier)
        return verifier


def flows_in_turn(specs: list[FlowSpec], start_id: int) -> list[FlowSpec]:
    """The flows in id order from `start_id` on, then the rest (`_next_flow_id`)."""
    ordered = sorted(specs, key=lambda spec: spec.flow_id)
    return [s for s in ordered if s.flow_id >= start_id] + [s for s in ordered if s.flow_id < start_id]


def run_verification(*, run: int = 0) -> ByteBudget:
    started, cpu_started = time.monotonic(), time.thread_time()
    budget = ByteBudget.for_run(
        bytes_per_s=settings.VERIFY_MAX_BYTES_PER_S, interval_s=settings.VERIFY_INTERVAL_S
    )
    clock = RunClock(deadline=started + settings.VERIFY_RUN_BUDGET_S)
    limits = VerificationLimits(
        range_records=settings.VERIFY_RANGE_RECORDS,
        hot_records=settings.VERIFY_HOT_RECORDS,
        cold_samples_per_run=settings.VERIFY_COLD_SAMPLES_PER_RUN,
    )
    global _next_flow_id
    specs = flows_in_turn(runtime.runtime_flow_specs(), _next_flow_id)
    health = context.cluster_health()
    checked = 0
    if specs:
        _next_flow_id = specs[0].flow_id + 1
    for index, spec in enumerate(specs):
        if index and (budget.exhausted or not clock.may_start(time.monotonic())):
            # The budget went on the flows before: the rest start the next run (each flow's ends and store
            # would be read and written here for nothing checked: at 20,000 partitions over 4 flows on a
            # loaded machine, runs of 50-145 s checking one batch).
            _next_flow_id = spec.flow_id
            log.info(
                "verification run: its budget spent; %d flow(s) wait for the next run", len(specs) - index
            )
            break
        now = time.time()
        if not all(health.check(cluster, now=now).reachable for cluster in (spec.source, spec.target)):
            continue  # the metadata task reports it; the verifier waits
        try:
            checked += _verify_flow(spec, limits=limits, budget=budget, clock=clock, run=run)
        except Exception:
            log.exception("flow %s: verification failed; retrying next run", spec.flow.name)
            with _verifiers_lock:
                cached = _verifiers.pop(spec.flow_id, None)
            if cached is not None:
                cached[1].close()
    elapsed, cpu = time.monotonic() - started, time.thread_time() - cpu_started
    log.info(
        "verification run: %d partitions checked, %d bytes read in %.2f s (cpu %.2f s) of an allowance of "
        "%d bytes",
        checked,
        budget.spent,
        elapsed,
        cpu,
        budget.allowance,
    )
    return budget


def _verify_flow(
    spec: FlowSpec, *, limits: VerificationLimits, budget: ByteBudget, clock: RunClock, run: int
) -> int:
    """Verify the flow's partitions with something new in rotation and store the run's outcome; the
    number of partitions checked."""
    verifier = _verifier(spec)
    verifier.refresh_syncs()
    stored = verification.verification_rows(flow_id=spec.flow_id)
    partitions = verification.partitions_to_verify(flow_id=spec.flow_id)
    ends = verifier.partition_ends([(p.topic, p.partition, p.remote_topic) for p in partitions])
    outcomes: list[PartitionOutcome] = []
    turns: list[PartitionTurn] = []
    for target in partitions:
        key = (target.topic, target.partition)
        if key not in ends:
            continue  # not listed by the source now: next run
        planned = verifier.partition_turn(
            topic=target.topic,
            partition=target.partition,
            remote_topic=target.remote_topic,
            progress=verification.progress_of(stored.get(key)),
            replicated_position=target.replicated_position,
            ends=ends[key],
            limits=limits,
            seed=run * 1_000_003 + target.partition,
        )
        (turns if isinstance(planned, PartitionTurn) else outcomes).append(planned)

    def last_checked(turn: PartitionTurn) -> datetime.datetime | None:
        row = stored.get((turn.topic, turn.partition))
        return row.checked_at if row else None

    turns = rotation(turns, last_checked=last_checked)
    verifier.verify(
        turns, limits=limits, budget=budget, clock=clock, batch_partitions=settings.VERIFY_BATCH_PARTITIONS
    )
    checked = [turn.outcome() for turn in turns if turn.checked]
    at = datetime.datetime.now(datetime.UTC)
    backlog = run_backlog(turns, last_checked=last_checked, at=at)
    if backlog.behind(now=at):  # said once per flow and process
        warn_once(
            log,
            "flow %s: verification is behind the flow: partitions with new records wait over %d minutes for "
            "a look; raise VERIFY_MAX_BYTES_PER_S (now %g) to about twice the flow's bytes/s (docs/scale.md)",
            spec.flow.name,
            BEHIND_S // 60,
            settings.VERIFY_MAX_BYTES_PER_S,
        )
    log.debug("flow %s: verification backlog %s", spec.flow.name, backlog)
    for outcome in verification.verification_run_record(
        flow_id=spec.flow_id,
        stored=stored,
        outcomes=[*outcomes, *checked],
        partitions={(p.topic, p.partition) for p in partitions},
        at=at,
        backlog=backlog,
    ):
        log.error("flow %s: verification mismatch: %s", spec.flow.name, outcome.reason)
    _observe(spec, verifier)
    return len(checked)


def _observe(spec: FlowSpec, verifier: FlowVerification) -> None:
    """The readiness observations, at most every ASSURANCE_INTERVAL_S per flow."""
    if time.monotonic() - _observed.get(spec.flow_id, -ASSURANCE_INTERVAL_S) < ASSURANCE_INTERVAL_S:
        return
    _observed[spec.flow_id] = time.monotonic()
    partition_problems, config_problems = verifier.topic_parity()
    verification.assurance_record(
        flow_id=spec.flow_id,
        groups_active_on_target=verifier.groups_active_on_target(),
        partition_problems=partition_problems,
        config_problems=config_problems,
        at=datetime.datetime.now(datetime.UTC),
    )
