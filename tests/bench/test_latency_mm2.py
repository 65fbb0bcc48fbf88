"""`python -m bench latency-mm2`'s verdict: Mirrorplane's p50 and p99 (medians over the rounds) against
MM2's at each size, ratios printed for Mirrorplane only."""

from __future__ import annotations

import pytest

from bench.latency_mm2 import FLOOR, MM2, OURS, Point, Tool, main, summarize

TOOLS = [Tool(MM2, {}), Tool(OURS, {}), Tool(FLOOR, {})]


def _points(tool: str, partitions: int, rate: int, p50s: list[float], p99s: list[float]) -> list[Point]:
    return [Point(tool, partitions, rate, 1000, p50, p99, 3.0) for p50, p99 in zip(p50s, p99s, strict=True)]


def test_a_size_where_mirrorplane_is_at_or_below_mm2_misses_nothing(capsys):
    points = [
        *_points(MM2, 8, 20_000, [22.0, 30.0, 25.0], [266.0, 200.0, 250.0]),
        *_points(OURS, 8, 20_000, [20.0, 40.0, 10.0], [250.0, 100.0, 300.0]),  # medians 20 and 250
        *_points(FLOOR, 8, 20_000, [5.0, 6.0, 7.0], [50.0, 60.0, 70.0]),
    ]
    assert summarize(points, TOOLS) == []
    out = capsys.readouterr().out
    assert "20.0 (10.0-40.0)" in out and "0.80" in out and "1.00" in out  # p50 20/25, p99 250/250


def test_each_of_p50_and_p99_above_mm2_is_a_miss_naming_the_size():
    points = [
        *_points(MM2, 4, 5_000, [10.0], [100.0]),
        *_points(OURS, 4, 5_000, [12.0], [90.0]),
        *_points(MM2, 64, 20_000, [10.0], [100.0]),
        *_points(OURS, 64, 20_000, [9.0], [101.0]),
    ]
    assert summarize(points, TOOLS) == [
        "4 partitions at 5,000 rec/s: Mirrorplane p50 12.0 ms above MM2's 10.0 ms",
        "64 partitions at 20,000 rec/s: Mirrorplane p99 101.0 ms above MM2's 100.0 ms",
    ]


def test_the_floor_is_never_a_miss(capsys):
    points = [*_points(MM2, 8, 5_000, [10.0], [100.0]), *_points(FLOOR, 8, 5_000, [50.0], [500.0])]
    assert summarize(points, TOOLS) == []
    floor_line = next(line for line in capsys.readouterr().out.splitlines() if FLOOR in line)
    assert "5.00" not in floor_line  # no ratio beside the floor


def test_a_bad_size_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--partitions", "eight"])
    assert exit.value.code == 2
    assert "--partitions" in capsys.readouterr().err
