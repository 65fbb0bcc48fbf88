"""Prometheus's text format of our families, the same bytes as prometheus-client's `generate_latest`, written
faster (`render_text`); a per-partition family kept as columns (`PartitionSeries`, `PartitionLabels`), so a
scrape of 20,000 partitions builds no 20,000 sample objects per family; the other families (per flow, per
topic, per worker) keep their samples as rows of a label set written as text once per scrape (`LabelSet`,
`Series`, `HistogramSeries`): a flow's labels are in some 50 families. tests/controlplane/metrics/test_prometheus_text.py
compares the two writers.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

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


class LabelSet:
    """A sample's labels, written as Prometheus text once (sorted by name, values escaped) however many
    families and samples carry them; as a dict only when prometheus-client's own writer asks (`as_dict`)."""

    __slots__ = ("pairs", "parts", "text")

    def __init__(self, names: Sequence[str], values: Sequence[str]):
        self.pairs = sorted(zip(names, values, strict=True))
        self.parts = [f'{name}="{label_value(value)}"' for name, value in self.pairs]  # each label's text
        self.text = ",".join(self.parts)

    def plus(self, name: str, value: str) -> LabelSet:
        """These labels and one more."""
        names, values = zip(*self.pairs, strict=True) if self.pairs else ((), ())
        return LabelSet([*names, name], [*values, value])

    def around(self, name: str) -> tuple[str, str]:
        """The text before and after where label `name` goes, with its commas: a histogram's `le`."""
        named = list(zip(self.pairs, self.parts, strict=True))
        before = ",".join([part for (label, _), part in named if label < name])
        after = ",".join([part for (label, _), part in named if label > name])
        return (f"{before}," if before else ""), (f",{after}" if after else "")

    def as_dict(self) -> dict[str, str]:
        return dict(self.pairs)


def label_set(names: Sequence[str], labels: LabelSet | Sequence[str]) -> LabelSet:
    """`labels` as a `LabelSet`: as it is, or its values named `names`."""
    return labels if isinstance(labels, LabelSet) else LabelSet(names, labels)


class Series(Metric):
    """A gauge or counter family kept as rows (label set, value): `add_metric` takes a `LabelSet` (or the
    label values, in the family's label order); `render_text` writes the rows' text, `samples` (what
    prometheus-client's own writer reads) are made from them when asked."""

    def __init__(self, name: str, documentation: str, typ: str, *, labels: Sequence[str], unit: str = ""):
        super().__init__(name, documentation, typ, unit)
        self.labelnames = tuple(labels)
        self.rows: list[tuple[LabelSet, float]] = []
        self.sample_name = f"{self.name}_total" if typ == "counter" else self.name

    def add_metric(self, labels: LabelSet | Sequence[str], value: float) -> None:
        self.rows.append((label_set(self.labelnames, labels), value))

    @property
    def samples(self) -> list[Sample]:
        return [Sample(self.sample_name, labels.as_dict(), value) for labels, value in self.rows]

    @samples.setter
    def samples(self, _empty: list) -> None:
        """Metric.__init__ starts a list of samples: this family's are its rows'."""

    def text(self) -> str:
        name = self.sample_name
        return "".join(
            [
                f"{name}{{{labels.text}}} {number(value)}\n" if labels.text else f"{name} {number(value)}\n"
                for labels, value in self.rows
            ]
        )


class HistogramSeries(Metric):
    """A histogram family kept as rows (label set, cumulative buckets, sum), written as prometheus-client's
    `HistogramMetricFamily` writes them: a `_bucket` sample per bound (`le`), then `_count` and `_sum`."""

    def __init__(self, name: str, documentation: str, *, labels: Sequence[str], unit: str = ""):
        super().__init__(name, documentation, "histogram", unit)
        self.labelnames = tuple(labels)
        self.rows: list[tuple[LabelSet, Sequence[tuple[str, float]], float]] = []

    def add_metric(
        self, labels: LabelSet | Sequence[str], buckets: Sequence[tuple[str, float]], sum_value: float
    ) -> None:
        self.rows.append((label_set(self.labelnames, labels), buckets, sum_value))

    @property
    def samples(self) -> list[Sample]:
        found: list[Sample] = []
        for labels, buckets, sum_value in self.rows:
            found.extend(
                Sample(f"{self.name}_bucket", {**labels.as_dict(), "le": bound}, value)
                for bound, value in buckets
            )
            found.append(Sample(f"{self.name}_count", labels.as_dict(), buckets[-1][1]))
            found.append(Sample(f"{self.name}_sum", labels.as_dict(), sum_value))
        return found

    @samples.setter
    def samples(self, _empty: list) -> None:
        """As `Series`."""

    def text(self) -> str:
        output: list[str] = []
        name = self.name
        for labels, buckets, sum_value in self.rows:
            before, after = labels.around("le")
            output.extend(
                f'{name}_bucket{{{before}le="{label_value(bound)}"{after}}} {number(value)}\n'
                for bound, value in buckets
            )
            braces = f"{{{labels.text}}}" if labels.text else ""
            output.append(f"{name}_count{braces} {number(buckets[-1][1])}\n")
            output.append(f"{name}_sum{braces} {number(sum_value)}\n")
        return "".join(output)


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

    Written (and `families`, read lazily, collected) with the cycle collector paused: a scrape of 500 flows
    allocates a few million short-lived objects (rows, label strings, samples), freed by reference counting,
    whose allocations would otherwise trigger full collections of the process's whole heap, about 40% of
    the scrape's CPU time (docs/metrics.md); the collector runs as usual after it.
    """
    with _cyclic_gc_paused():
        return _text(families)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Python's cycle collector off meanwhile (on again after, unless it was off before)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _text(families: Iterable[Metric]) -> str:
    output: list[str] = []
    for metric in families:
        name = f"{metric.name}_total" if metric.type == "counter" else metric.name
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        output.append(f"# HELP {name} {doc}\n# TYPE {name} {metric.type}\n")
        if isinstance(metric, PartitionSeries | Series | HistogramSeries):
            output.append(metric.text())
            continue
        for sample in metric.samples:
            if sample.labels:
                labels = ",".join(f'{k}="{label_value(v)}"' for k, v in sorted(sample.labels.items()))
                output.append(f"{sample.name}{{{labels}}} {number(sample.value)}\n")
            else:
                output.append(f"{sample.name} {number(sample.value)}\n")
    return "".join(output)
