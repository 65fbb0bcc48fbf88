"""The pure pieces of `python -m bench engine`'s command line (the bench itself runs by hand)."""

from __future__ import annotations

import pytest

from bench import engine_vs_raw


def test_a_size_no_scenario_has_is_an_error_not_an_empty_run():
    parser = engine_vs_raw.scenarios_parser(prog="bench engine", description="")
    with pytest.raises(
        SystemExit, match="--size 1000: no scenario of that size; the sizes are 100, 1024, 10240"
    ):
        engine_vs_raw.chosen_scenarios(parser.parse_args(["--size", "1000"]))
    chosen = engine_vs_raw.chosen_scenarios(parser.parse_args(["--size", "1024"]))
    assert [scenario.value_bytes for scenario in chosen] == [1024]


def test_partitions_and_records_change_every_chosen_scenario_and_its_label():
    parser = engine_vs_raw.scenarios_parser(prog="bench engine", description="")
    (default,) = engine_vs_raw.chosen_scenarios(parser.parse_args(["--size", "100"]))
    assert (default.records, default.partitions, default.label) == (1_000_000, 4, "1,000,000 x 100 B")
    args = parser.parse_args(["--size", "100", "--partitions", "5000", "--records", "500000"])
    (chosen,) = engine_vs_raw.chosen_scenarios(args)
    assert (chosen.records, chosen.partitions, chosen.label) == (500_000, 5000, "500,000x100B 5000p")
