"""Prometheus's text format of our families, the same bytes as prometheus-client's `generate_latest`, written
faster (`render_text`); a per-partition family kept as columns (`PartitionSeries`, `PartitionLabels`), so a
scrape of 20,000 partitions builds no 20,000 sample objects per family. tests/controlplane/metrics/test_prometheus_text.py
compares the two writers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString


class PartitionLabels:
    """The label sets of a scrape's partitions (flow, topic, partition), shared by their families: each
    written as text once (`texts`, what `render_text` writes), as dicts only when asked (`dicts`, what
    prometheus-client's own writer reads)."""

    def __init__(
        self, *, flows: Sequence[str], topics: Sequence[str], partitions: Sequence[int], states=None
    ):
        self.flows, self.topics, self.partitions, self.states = flows, topics, partitions, states
        escaped = {flow: label_value(flow) for flow in set(flows)}
        state_labels = [""] * len(flows) if states is None else [f'state="{label_value(s)}",' for s in states]
        self.texts = [
            f'flow="{escaped[flow]}",partition="{partition}",{state}topic="{label_value(topic)}"'
            for flow, partition, state, topic in zip(flows, partitions, state_labels, topics, strict=True)
        ]

    def with_state(self, states: Sequence[str]) -> PartitionLabels:
        return PartitionLabels(
            flows=self.flows, topics=self.topics, partitions=self.partitions, states=states
        )

    @property
    def dicts(self) -> list[dict[str, str]]:
        found = [
            {"flow": flow, "topic": topic, "partition": str(partition)}
            for flow, topic, partition in zip(self.flows, self.topics, self.partitions, strict=True)
        ]
        if self.states is not None:
            for labels, state in zip(found, self.states, strict=True):
                labels["state"] = state
        return found


class PartitionSeries(Metric):
    """A per-partition family of a scrape kept as columns: its partitions' label sets and its values (None:
    no series). `render_text` writes it from the columns (at 20,000 partitions, seven families of 20,000
    series each); `samples`, what prometheus-client's own writer reads, are made from them when asked."""

    def __init__(self, name: str, documentation: str, typ: str, *, labels: PartitionLabels, values: Sequence):
        self.labels, self.values = labels, values
        super().__init__(name, documentation, typ)
        self.sample_name = f"{name}_total" if typ == "counter" else name

    @property
    def samples(self) -> list[Sample]:
        return [
            Sample(self.sample_name, labels, value)
            for labels, value in zip(self.labels.dicts, self.values, strict=True)
            if value is not None
        ]

    @samples.setter
    def samples(self, _empty: list) -> None:
        """Metric.__init__ starts a list of samples: this family's are its columns'."""

    def text(self) -> str:
        name = self.sample_name
        return "".join(
            [
                f"{name}{{{labels}}} {number(value)}\n"
                for labels, value in zip(self.labels.texts, self.values, strict=True)
                if value is not None
            ]
        )


def number(value: float) -> str:
    """`floatToGoString`'s text, without its float round trip for the small whole numbers most series
    hold (it writes 1e+06 and up in exponent form)."""
    if type(value) is int and -(10**15) < value < 1_000_000:
        return f"{value}.0"
    return floatToGoString(value)


def label_value(value: str) -> str:
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def render_text(families: Iterable[Metric]) -> str:
    """Prometheus's text format of `families`, the same bytes as prometheus-client's `generate_latest`.

    Our families are built with prometheus-client; only their text is written here: `generate_latest`
    re-checks every label name of every sample against the UTF-8 naming rules, which was half of a 500-flow
    scrape. Our names are fixed identifiers (checked once per family by prometheus-client when the family is
    built), so only label values need escaping; a per-partition family is written from its columns
    (`PartitionSeries`). tests/controlplane/metrics/test_prometheus_text.py compares the two.
    """
    output: list[str] = []
    for metric in families:
        name = f"{metric.name}_total" if metric.type == "counter" else metric.name
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        output.append(f"# HELP {name} {doc}\n# TYPE {name} {metric.type}\n")
        if isinstance(metric, PartitionSeries):
            output.append(metric.text())
            continue
        for sample in metric.samples:
            if sample.labels:
                labels = ",".join(f'{k}="{label_value(v)}"' for k, v in sorted(sample.labels.items()))
                output.append(f"{sample.name}{{{labels}}} {number(sample.value)}\n")
            else:
                output.append(f"{sample.name} {number(sample.value)}\n")
    return "".join(output)
