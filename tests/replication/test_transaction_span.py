"""How long a transaction runs (`TransactionSpan`): at the persist cadence when the task is caught up (as
before), longer while the source holds a backlog behind it, within bounds; and a task copying a backlog
on in-memory clients commits it in fewer transactions than one per persist cadence, each record once.
tests/replication/test_transactions.py counts the commits of a backlog on Apache Kafka."""

from __future__ import annotations

from replication import transactions
from replication.config import DeliveryGuarantee
from replication.positions import PERSIST_RECORDS, InMemoryPositionStore
from replication.transactions import TransactionSpan
from tests.replication.test_source_task_unit import REMOTE, TOPIC, make_io, make_task
from tests.replication.test_transactional_delivery import copied_in_order


def span() -> TransactionSpan:
    return TransactionSpan(interval_s=0.2, records=10_000, max_scale=16, max_bytes=1_000_000)


class Backlog:
    """`behind(n)` of a source with `waiting` records past what was fetched; the questions asked."""

    def __init__(self, waiting: int) -> None:
        self.waiting, self.asked = waiting, []

    def __call__(self, records: int) -> bool:
        self.asked.append(records)
        return self.waiting >= records


def test_caught_up_a_transaction_commits_at_the_persist_cadence():
    rule, backlog = span(), Backlog(waiting=10_999)
    assert not rule.goes_on(age_s=0.2, records=11_000, bytes_=400_000, behind=backlog)
    assert backlog.asked == [11_000] and rule.scale == 1


def test_less_than_a_cadence_of_records_behind_a_transaction_commits_at_the_persist_cadence():
    """20,000 records/s held up for 0.25 s: 5,000 wait, more than the 4,000 it holds, not a backlog."""
    rule, backlog = span(), Backlog(waiting=5_000)
    assert not rule.goes_on(age_s=0.2, records=4_000, bytes_=400_000, behind=backlog)
    assert backlog.asked == [10_000] and rule.scale == 1


def test_with_a_backlog_at_least_what_it_holds_its_bounds_double_and_the_backlog_is_asked_at_them_only():
    rule, backlog = span(), Backlog(waiting=50_000)
    assert rule.goes_on(age_s=0.2, records=4_000, bytes_=4_000, behind=backlog) and rule.scale == 2
    # Within the doubled bounds (0.4 s, 20,000 records) it goes on without asking.
    assert rule.goes_on(age_s=0.39, records=19_999, bytes_=19_999, behind=backlog)
    assert backlog.asked == [10_000]
    assert rule.goes_on(age_s=0.4, records=12_000, bytes_=12_000, behind=backlog) and rule.scale == 4
    backlog.waiting = 11_999  # less than it holds now: it commits at the next bound
    assert rule.goes_on(age_s=0.5, records=15_000, bytes_=15_000, behind=backlog)
    assert not rule.goes_on(age_s=0.6, records=40_000, bytes_=40_000, behind=backlog)
    assert backlog.asked == [10_000, 12_000, 40_000]


def test_a_transaction_with_nothing_acknowledged_yet_goes_on_without_asking_up_to_the_longest_span():
    """The cadence came due just after the fetch that began it: caught up or not, no commit yet."""
    rule, backlog = span(), Backlog(waiting=0)
    assert rule.goes_on(age_s=0.2, records=0, bytes_=0, behind=backlog)
    assert rule.goes_on(age_s=3.19, records=0, bytes_=0, behind=backlog)
    assert backlog.asked == [] and rule.scale == 1
    assert not rule.goes_on(age_s=3.2, records=0, bytes_=0, behind=backlog)
    assert not rule.goes_on(age_s=0.2, records=0, bytes_=1_000_000, behind=backlog)
    assert not rule.goes_on(age_s=0.2, records=1, bytes_=1, behind=backlog)  # then caught up: commits
    assert backlog.asked == [10_000]


def test_its_growth_is_bounded_in_time_records_and_bytes_whatever_the_backlog():
    rule, backlog = span(), Backlog(waiting=10**9)
    age, ends = 0.2, 0
    while rule.goes_on(age_s=age, records=1, bytes_=1, behind=backlog):
        age = rule.interval_s * rule.scale
        ends += 1
    assert rule.scale == 16 and age == 3.2 and ends == 4  # 0.2 -> 0.4 -> 0.8 -> 1.6 -> 3.2 s
    rule = span()
    while rule.goes_on(age_s=0.0, records=rule.records * rule.scale, bytes_=1, behind=backlog):
        pass
    assert rule.scale == 16
    assert not span().goes_on(age_s=0.0, records=1, bytes_=1_000_000, behind=backlog)
    rule.reset()
    assert rule.scale == 1


def test_a_task_commits_a_backlog_in_fewer_transactions_than_one_per_persist_cadence_each_record_once(
    monkeypatch,
):
    # Spans bounded by records only: the count does not depend on how fast this machine copies.
    monkeypatch.setattr(transactions, "PERSIST_INTERVAL_S", 3600.0)
    records = 20_000  # per partition, 3 partitions: 60,000 behind, 6 persist cadences of records at least
    io, store = make_io(records=records), InMemoryPositionStore()
    task = make_task(
        io, store, guarantee=DeliveryGuarantee.EXACTLY_ONCE, transactional=True, per_partition=500
    )
    keys = [(TOPIC, p) for p in range(3)]
    for _ in range(200):  # as dedicated mode runs it
        if task.run_slice(max_seconds=0.5, settle=False, return_when_caught_up=True).caught_up:
            break
    task.close()
    (sink,) = io.made
    commits = sink.calls.count("commit")
    assert 1 <= commits < 3 * records // PERSIST_RECORDS / 2, sink.calls
    assert copied_in_order(io) and [len(io.target_cluster.read(REMOTE, p)) for p in range(3)] == [records] * 3
    assert store.load(flow=task.flow.name, partitions=keys) == {key: records for key in keys}
