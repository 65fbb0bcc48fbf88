"""The cutover's fence (pure): fenced only after the end offsets stayed the same for the whole wait;
any change starts it again and is kept as evidence."""

from __future__ import annotations

from replication.cutover import FenceWatch


def test_the_wait_starts_again_at_every_change_and_keeps_what_moved():
    watch = FenceWatch(still_s=5, started=100.0, ends={("orders", 0): 10, ("orders", 1): 4})
    watch.observe({("orders", 0): 10, ("orders", 1): 4}, now=103.0)
    assert not watch.fenced(now=103.0)
    watch.observe({("orders", 0): 13, ("orders", 1): 4}, now=104.0)  # a producer still writes
    assert not watch.fenced(now=108.0)
    watch.observe({("orders", 0): 13, ("orders", 1): 2}, now=108.5)  # went back: a recreated topic
    watch.observe({("orders", 0): 13, ("orders", 1): 2}, now=113.4)
    assert not watch.fenced(now=113.4) and watch.fenced(now=113.5)
    evidence = watch.evidence(now=113.5)
    assert evidence["appended_while_watched"] == {"orders[0]": 3, "orders[1]": 0}
    assert (evidence["watched_s"], evidence["still_for_s"], evidence["partitions"]) == (13.5, 5.0, 2)
