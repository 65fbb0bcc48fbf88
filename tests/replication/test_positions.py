"""PersistCadence: when a running slice persists its positions (pure: time passed in)."""

from __future__ import annotations

from replication.positions import PersistCadence


def test_positions_are_due_after_the_interval_or_the_record_count_whichever_comes_first():
    cadence = PersistCadence(interval_s=0.2, records=10_000, now=100.0)
    assert not cadence.due(now=100.1, acked=9_999)
    assert cadence.due(now=100.2, acked=0)
    assert cadence.due(now=100.05, acked=10_000)
    cadence.persisted(now=100.05, acked=10_000)
    assert not cadence.due(now=100.2, acked=19_999)
    assert cadence.due(now=100.25, acked=10_000)
    assert cadence.due(now=100.06, acked=20_000)
