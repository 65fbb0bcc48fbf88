"""The pure pieces of `python -m bench scale`: its options, topic layout and report (the bench itself
runs brokers and workers for minutes: it is run by hand, never by the tests)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench import scale


def test_topics_of_the_layout_add_up_to_the_partitions_asked_for():
    layout = scale.topic_layout("scale0-runtime", 120, 50)

    assert layout == {"scale0-runtime-0000": 50, "scale0-runtime-0001": 50, "scale0-runtime-0002": 20}
    assert scale.topic_layout("p", 100, 50) == {"p-0000": 50, "p-0001": 50}


def test_a_fleet_shares_the_partitions_between_its_flows_each_regex_matching_only_its_own_topics():
    import re

    layout = scale.fleet_layout("scale0-runtime", 20_003, 50, 4, source="A")

    assert [alias for alias, _, _ in layout] == ["A", "A2", "A3", "A4"]  # one flow per ordered pair
    assert [sum(topics.values()) for *_, topics in layout] == [5001, 5001, 5001, 5000]
    names = [name for *_, topics in layout for name in topics]
    assert len(names) == len(set(names)) == 3 * 101 + 100
    for k, (_, regex, topics) in enumerate(layout):
        mine = [name for name in names if re.fullmatch(regex, name)]
        assert mine == list(topics), k
    remote = scale.remote_names(layout)
    assert remote["scale0-runtime-f0-0000"] == "A.scale0-runtime-f0-0000"
    assert remote["scale0-runtime-f3-0099"] == "A4.scale0-runtime-f3-0099"
    assert scale.fleet_layout("p", 100, 50, 1, source="A") == [
        ("A", "p-[0-9]+", {"p-0000": 50, "p-0001": 50})
    ]


def test_options_default_to_both_modes_beside_mm2_and_repeat():
    args = scale.parse([])
    assert (args.partitions, args.mode, args.without_mm2) == ([100], ["runtime", "dedicated"], False)
    assert (args.flows, args.workers) == (1, 1)

    args = scale.parse(
        ["--partitions", "500", "--partitions", "2000", "--mode", "dedicated", "--mode", "dedicated"]
    )
    assert (args.partitions, args.mode) == ([500, 2000], ["dedicated"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--partitions", "0"], "argument --partitions: 0 must be at least 1"),
        (["--partitions", "many"], "argument --partitions: 'many' is not a whole number"),
        (["--rate-per-partition", "-1"], "argument --rate-per-partition: -1 must be above 0"),
        (["--seconds", "nan"], "argument --seconds: nan must be above 0"),
        (["--mode", "embedded"], "argument --mode: invalid choice: 'embedded'"),
        (["--redis-db", "-2"], "argument --redis-db: -2 is not a Redis database number"),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        scale.parse(argv)

    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_ratios_are_mirrorplane_over_mm2_and_unknown_is_a_dash():
    assert scale.ratio(1.0, 4.0) == "0.25"
    assert scale.ratio(None, 4.0) == scale.ratio(1.0, None) == scale.ratio(1.0, 0.0) == "-"


def test_the_report_puts_each_tool_beside_mm2_and_names_a_failed_run():
    runtime = scale.Run("runtime", load_average=(1.5, 1.0, 0.5), start_s=10.0, p99_ms=50.0, cpu_per_s=0.2)
    dedicated = scale.Run(
        "dedicated", start_s=5.0, failure="PhaseTimeout: every partition flowing within 300 s"
    )
    mm2 = scale.Run("mm2", start_s=40.0, p99_ms=100.0, cpu_per_s=0.4)

    lines = scale.report(100, [runtime, dedicated, mm2], topics=2, rate=1.0, seconds=60.0)

    table = {line[:44].strip(): line[44:].split() for line in lines if line[:44].strip()}
    assert table["start to every partition flowing (s)"] == ["10.0", "5.0", "40.0", "0.25", "0.12"]
    assert table["end-to-end p99 (ms)"] == ["50.0", "-", "100.0", "0.50", "-"]
    assert table["load average 1/5/15 min (window end)"][0] == "1.5/1.0/0.5"
    assert "FAILED dedicated: PhaseTimeout: every partition flowing within 300 s" in lines


def test_without_a_successful_mm2_run_there_are_no_ratios():
    ours, mm2 = scale.Run("dedicated", start_s=5.0), scale.Run("mm2", failure="RuntimeError: mm2 exited (1)")

    lines = scale.report(100, [ours, mm2], topics=2, rate=1.0, seconds=60.0)

    assert not any("/mm2" in line for line in lines)
    assert next(line for line in lines if line.startswith("start to every")).split()[-2:] == ["5.0", "-"]


def test_a_run_whose_load_never_wrote_some_partitions_says_so_and_has_no_start_figures():
    run = scale.Run("runtime", p99_ms=50.0, never_written=1)

    lines = scale.report(10_000, [run], topics=200, rate=0.25, seconds=60.0)

    assert next(line for line in lines if line.startswith("start to every")).split()[-1] == "-"
    assert any(line.startswith("NOTE runtime: 1 of the 10,000 partitions had no record") for line in lines)
    assert not any(line.startswith("FAILED") for line in lines)


def test_a_partition_the_tool_did_not_copy_is_named_whatever_the_counts():
    """The target may hold as many partitions as the source asked earlier (the load wrote on, the tool
    copied a newer one) and still miss one: the check is per partition, not a count."""
    remote = {"t": "A.t"}
    on_source = {("t", 0), ("t", 1)}

    assert scale.uncopied(on_source, {("A.t", 0), ("A.t", 2)}, remote) == {("t", 1)}
    assert scale.uncopied(on_source, {("A.t", 0), ("A.t", 1), ("A.t", 2)}, remote) == set()


def test_the_control_plane_lines_give_the_verification_backlog_or_say_there_is_none():
    figures = scale.ControlPlane()
    assert "verification: backlog at the end                   - (no run stored one)" in figures.lines(2000)
    figures.backlog = (30, 4_500, 329.44)
    (line,) = [line for line in figures.lines(2000) if "backlog" in line]
    assert line.endswith("329.4 s longest wait; 4,500 records in 30 partitions"), line
    figures.backlog = (0, 0, None)
    (line,) = [line for line in figures.lines(2000) if "backlog" in line]
    assert line.endswith("- longest wait; 0 records in 0 partitions"), line


def test_the_control_plane_lines_count_stale_and_stalled_partitions():
    figures = scale.ControlPlane(status_ages=[9.0, 12.5], status_rows_seen=5000, stale=3, stalled=1)
    (line,) = [line for line in figures.lines(5000) if "oldest partition status" in line]
    assert line.endswith(
        "12.5 s max, 10.8 s median over 2 samples (5,000 of 5,000 rows; at most 3 STALE, 1 STALL)"
    )


def test_the_control_plane_lines_say_when_records_were_fetched_and_acknowledged():
    figures = scale.ControlPlane()
    assert not [line for line in figures.lines(2000) if "acknowledged after" in line]
    figures.record_ages_ms, figures.latencies_ms = [1_000.0, 3_000.0, 2_000.0], [9_000.0, 7_000.0, 8_000.0]
    (line,) = [line for line in figures.lines(2000) if "acknowledged after" in line]
    assert "     2.0 / 8.0 s" in line and "over 3 samples" in line, line


def test_the_start_beyond_the_source_counts_each_partition_from_its_first_record_there():
    remote = {"t": "A.t"}
    started = 100.0
    floor = {("t", 0): 90.0, ("t", 1): 150.0}  # partition 1 written by the load only at 150
    copy = {("A.t", 0): 130.0, ("A.t", 1): 155.0}
    assert scale.start_beyond_source(copy=copy, floor=floor, remote=remote, started=started) == 30.0
    copy[("A.t", 0)] = 110.0
    assert scale.start_beyond_source(copy=copy, floor=floor, remote=remote, started=started) == 10.0
    del copy[("A.t", 1)]
    assert scale.start_beyond_source(copy=copy, floor=floor, remote=remote, started=started) is None
    assert scale.start_beyond_source(copy=copy, floor={}, remote=remote, started=started) is None


def test_every_partition_started_is_when_the_workers_logs_account_for_every_topics_partitions():
    logs = {
        "replication": (
            "2026-11-30 13:26:24,560 INFO replication.starting: flow A->B task 0: replicating t0 -> A.t0, "
            "2 partition(s) from (partition@offset) 0@0 1@0\n"
            "2026-11-30 13:26:30,000 INFO replication.starting: flow A->B task 0: replicating t0 -> A.t0, "
            "2 partition(s) from (partition@offset) 0@5 1@5\n"  # started again: counts once
        ),
        "replication-2": (
            "2026-11-30 13:26:40,250 INFO replication.starting: flow A->B task 1: replicating t1 -> A.t1, "
            "1 partition(s) from (partition@offset) 0@0\n"
            "2026-11-30 13:26:50,000 INFO replication.starting: flow A->B task 1: replicating t1 -> A.t1, "
            "2 partition(s) from (partition@offset) 1@0 2@0\n"
        ),
    }
    tool = object.__new__(scale.RuntimeTool)
    tool.workers = 2
    tool.runtime = SimpleNamespace(log=logs.__getitem__)

    assert tool.all_started_at({"t0": 2, "t1": 3}) == scale._log_time("2026-11-30 13:26:50,000")
    assert tool.all_started_at({"t0": 2, "t1": 4}) is None
    assert tool.all_started_at({"t0": 2}) == scale._log_time("2026-11-30 13:26:24,560")


def test_flowing_at_is_the_middle_and_the_last_first_record_once_enough_partitions_flow():
    first = {("t", 0): 12.0, ("t", 1): 10.0, ("t", 2): 30.0, ("t", 3): 11.0}
    assert scale.flowing_at(first, 4) == (11.0, 30.0)
    assert scale.flowing_at(first, 5) == (12.0, None)  # 4 of 5 flow: half (the third), not all
    assert scale.flowing_at({("t", 0): 1.0}, 3) == (None, None)
    assert scale.flowing_at({}, 0) == (None, None)
