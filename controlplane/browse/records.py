"""The topic and message browser's reads: a cluster's topics, a topic's partitions, a page of records from
an offset or a moment, and a mirrored record beside its copy on the target.

Selectors only: nothing here writes. Every Kafka read goes through `cluster_reads.cluster_read` (bounded
by the cluster timeout, refused at once while the cluster does not answer) and is bounded by a record
count (at most MAX_RECORDS): never a whole topic. Viewers see the values of topics matching
MIRRORPLANE_BROWSE_MASKED_TOPICS masked; operators and admins see them. Bad input raises
ServiceValidationError naming the field and the fix.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from django.conf import settings

from controlplane.browse.record_schemas import Decoder, record_decoder
from controlplane.browse.seek import Seek, topic_name_error
from controlplane.browse.topic_sizes import SizesOnDisk, sizes_on_disk
from controlplane.core.errors import ServiceValidationError
from controlplane.core.roles import Role
from controlplane.flows import engine, selectors
from controlplane.flows.cluster_reads import cluster_read, clusters_read, timed
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster, Flow
from controlplane.status import runtime
from controlplane.status.models import FlowEvent, FlowEventKind
from replication.browse import (
    CopyState,
    KafkaRecord,
    MaskPatterns,
    PartitionOffsets,
    Rendered,
    ValueFormat,
    compare_copies,
    masked_bytes,
    render_bytes,
    render_decoded,
    target_read,
)
from replication.cluster_ports import RecordPage as BrowsedPage
from replication.cluster_ports import TopicListing, TopicReads, TopicSizes, UnknownTopic
from replication.config import ClusterConfig


# -- mirrors of a topic -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mirror:
    """A flow that copies this topic (`role` source: this cluster is its source) or whose copy it is."""

    flow: Flow
    role: str  # "source": this topic is copied to `other_topic` on the flow's target; "target": it is a copy
    source_topic: str
    remote_topic: str

    @property
    def other_cluster(self) -> Cluster:
        return self.flow.target if self.role == "source" else self.flow.source

    @property
    def other_topic(self) -> str:
        return self.remote_topic if self.role == "source" else self.source_topic


def _aliases() -> list[str]:
    return list(selectors.cluster_list().values_list("alias", flat=True))


def mirrors_by_topic(*, cluster: Cluster, topics: Iterable[str]) -> dict[str, list[Mirror]]:
    """For each of `topics` of `cluster`: the flows that replicate it, and the flow that wrote it as a
    remote topic (the engine's own topic classification, no cluster read)."""
    aliases = _aliases()
    names = list(topics)
    found: dict[str, list[Mirror]] = {name: [] for name in names}
    for flow in selectors.flow_list().filter(source=cluster) | selectors.flow_list().filter(target=cluster):
        selection = engine.topic_selection(flow, known_aliases=aliases)
        policy = selection.policy
        for topic in names:
            if flow.source_id == cluster.pk:
                decision = selection.decide(topic)
                if decision.replicate and decision.remote_topic:
                    found[topic].append(Mirror(flow, "source", topic, decision.remote_topic))
            upstream = policy.upstream_topic(topic) if flow.target_id == cluster.pk else None
            if (
                upstream
                and policy.format_remote_topic(flow.source.alias, upstream) == topic
                and selection.decide(upstream).replicate
            ):
                found[topic].append(Mirror(flow, "target", upstream, topic))
    return found


# -- reads ------------------------------------------------------------------------------------------------
@dataclass
class TopicList:
    cluster: Cluster
    topics: list[TopicListing]
    read_at: datetime.datetime
    read_ms: float
    mirrors: dict[str, list[Mirror]] = field(default_factory=dict)
    sizes: SizesOnDisk = field(default_factory=SizesOnDisk)  # every topic's, read after the list

    @property
    def rows(self) -> list[tuple[TopicListing, list[Mirror], TopicSizes | None]]:
        return [(t, self.mirrors.get(t.name, []), self.sizes.of(t.name)) for t in self.topics]


def topic_list(*, cluster: Cluster) -> TopicList:
    topics, read_at, read_ms = timed(
        lambda: cluster_read(
            cluster, lambda config, timeout: clusters().topic_reads(config, timeout_s=timeout).topics()
        )
    )
    mirrors = mirrors_by_topic(cluster=cluster, topics=[t.name for t in topics])
    sizes = sizes_on_disk(cluster=cluster, leaders=None, brokers=None)
    return TopicList(cluster, topics, read_at, read_ms, mirrors, sizes)


def _partitions(cluster: Cluster, topic: str) -> list[PartitionOffsets]:
    if error := topic_name_error(topic):
        raise ServiceValidationError.single("topic", error)

    def read(config: ClusterConfig, timeout_s: float) -> list[PartitionOffsets]:
        return clusters().topic_reads(config, timeout_s=timeout_s).partition_offsets(topic)

    try:
        return cluster_read(cluster, read)
    except UnknownTopic as exc:
        raise ServiceValidationError.single("topic", f"{exc}: check the name on the topics page") from exc


@dataclass(frozen=True)
class ShownRecord:
    """A record as a page and the API show it (values masked when the reader may not see them)."""

    partition: int
    offset: int
    timestamp_ms: int | None  # as the producer or broker wrote it: any 64-bit number
    timestamp: datetime.datetime | None  # None when there is none or it lies outside years 1-9999
    key: Rendered
    value: Rendered
    headers: tuple[tuple[str, Rendered], ...]

    def to_dict(self) -> dict:
        return {
            "partition": self.partition,
            "offset": self.offset,
            "timestamp_ms": self.timestamp_ms,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "key": self.key.to_dict(),
            "value": self.value.to_dict(),
            "headers": [{"name": name, "value": value.to_dict()} for name, value in self.headers],
        }


def _moment(timestamp_ms: int | None) -> datetime.datetime | None:
    """The record's time, or None outside the calendar a page can show (years 1-9999): a producer may
    write any 64-bit timestamp, and the raw milliseconds are shown then."""
    if timestamp_ms is None:
        return None
    try:
        return datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def shown(
    record: KafkaRecord, *, fmt: ValueFormat, masked: bool, decoder: Decoder | None = None
) -> ShownRecord:
    """A record as pages and the API show it; with `decoder` (the cluster's registry), a key or value in
    the wire format is shown decoded with its schema (auto format only; never a masked value)."""

    def readable(data: bytes | None) -> Rendered:
        return render_decoded(data, decoder(data), fmt) if decoder else render_bytes(data, fmt)

    value = masked_bytes if masked else (lambda data: render_bytes(data, fmt))
    return ShownRecord(
        partition=record.partition,
        offset=record.offset,
        timestamp_ms=record.timestamp_ms,
        timestamp=_moment(record.timestamp_ms),
        key=readable(record.key),
        value=masked_bytes(record.value) if masked else readable(record.value),
        headers=tuple((name, value(data)) for name, data in record.headers),
    )


def masks_values(*, topic: str, role: Role | None) -> bool:
    """The one masking rule of record contents, wherever they are shown (the browser, the copies page, a
    verification mismatch's records): viewers (and anyone below operator) see the values and header
    values of the topics MIRRORPLANE_BROWSE_MASKED_TOPICS names masked; keys are shown."""
    if role is not None and role >= Role.OPERATOR:
        return False
    return MaskPatterns(settings.MIRRORPLANE_BROWSE_MASKED_TOPICS).masks(topic)


def masks_copy_values(*, topic: str, remote_topic: str, role: Role | None) -> bool:
    """masks_values of a record and its copy: masked when either name is (the copy is the same data)."""
    return masks_values(topic=topic, role=role) or masks_values(topic=remote_topic, role=role)


MASKED_EVIDENCE = "masked"


def _masked_evidence(record: Mapping | None) -> Mapping | None:
    """A stored record (`MirroredRecord.as_evidence`) masked as `shown` masks a read one."""
    if record is None:
        return None
    return {
        **record,
        "value": None if record.get("value") is None else MASKED_EVIDENCE,
        "headers": [
            [name, None if value is None else MASKED_EVIDENCE] for name, value in record.get("headers", [])
        ],
    }


def event_detail_shown(*, event: FlowEvent, role: Role | None) -> dict:
    """An event's detail as `role` may see it: the two records a data_mismatch holds (source and copy)
    under masks_values, like the copies page; other events hold no record contents."""
    detail = dict(event.detail or {})
    if event.kind != FlowEventKind.DATA_MISMATCH:
        return detail
    remote_topic = detail.get("remote_topic") or ""
    if masks_copy_values(topic=event.topic, remote_topic=remote_topic, role=role):
        detail["source"] = _masked_evidence(detail.get("source"))
        detail["target"] = _masked_evidence(detail.get("target"))
    return detail


@dataclass
class RecordPage:
    cluster: Cluster
    topic: str
    partitions: list[PartitionOffsets]
    seek: Seek
    start_offset: int | None  # where the read began (None: nothing at or after the moment or the offset)
    records: list[ShownRecord]
    complete: bool
    masked: bool
    mirrors: list[Mirror]
    read_at: datetime.datetime
    read_ms: float
    notes: list[str] = field(default_factory=list)

    @property
    def previous_offset(self) -> int | None:
        """Where the page before this one starts (None: this one starts at the log start)."""
        earliest = self.partitions[self.seek.partition].earliest
        if self.start_offset is None or self.start_offset <= earliest:
            return None
        return max(self.start_offset - self.seek.max_records, earliest)


def _start_offset(
    browser: TopicReads, topic: str, seek: Seek, offsets: PartitionOffsets, notes: list[str]
) -> int | None:
    if seek.offset is not None:
        if seek.offset > offsets.end:  # the consumer would "reset" such an offset to the log start
            notes.append(
                f"offset {seek.offset} is past the partition's end {offsets.end}: no record there yet"
            )
            return None
        if seek.offset < offsets.earliest:
            notes.append(
                f"offset {seek.offset} is before the log start {offsets.earliest} (retention deleted it): "
                "read from the log start"
            )
            return offsets.earliest
        return seek.offset
    if seek.timestamp_ms is not None:
        found = browser.offsets_at([(topic, seek.partition)], seek.timestamp_ms).get(
            (topic, seek.partition), -1
        )
        return None if found < 0 else found
    return max(offsets.end - seek.max_records, offsets.earliest)  # the newest records


def _untrusted_end(offsets: PartitionOffsets, notes: list[str]) -> None:
    if offsets.listed_end is not None:
        notes.append(
            f"the broker listed the partition's end at offset {offsets.listed_end}, yet a fetch finds it at "
            f"{offsets.end}: its offset answers cannot be trusted (the embedded demo broker answers so; "
            "Apache Kafka does not), so this page reads from the end the fetch found"
        )


# Reads past records older than the moment at most this often (a broker's time index may be coarse).
_TIME_SEEK_READS = 4


def _from_moment(
    browser: TopicReads, topic: str, seek: Seek, page: BrowsedPage, start: int, *, moment_ms: int
) -> tuple[BrowsedPage, int]:
    """The page from the first record at or after the moment: some brokers answer a time lookup with an
    offset before it (a batch's or an index entry's), so older records at the head are skipped."""
    deadline = time.monotonic() + browser.timeout_s
    reads = 1
    while True:
        kept = [r for r in page.records if r.timestamp_ms is None or r.timestamp_ms >= moment_ms]
        settled = bool(kept) or len(page.records) < seek.max_records
        if settled or reads >= _TIME_SEEK_READS or time.monotonic() > deadline:
            # Unsettled: every record read so far is older than the moment; the page says it stopped.
            return BrowsedPage(kept, page.complete and settled), (kept[0].offset if kept else start)
        start = page.records[-1].offset + 1
        page = browser.read(topic, seek.partition, start=start, max_records=seek.max_records)
        reads += 1


@dataclass
class _RawPage:
    partitions: list[PartitionOffsets]
    start_offset: int | None
    records: list[KafkaRecord]
    complete: bool
    read_at: datetime.datetime
    read_ms: float
    notes: list[str]


def _read_page(cluster: Cluster, topic: str, seek: Seek) -> _RawPage:
    if error := topic_name_error(topic):
        raise ServiceValidationError.single("topic", error)
    notes: list[str] = []

    def read(config: ClusterConfig, timeout_s: float):
        browser = clusters().topic_reads(config, timeout_s=timeout_s)
        try:
            partitions = browser.partition_offsets(topic)
        except UnknownTopic as exc:
            raise ServiceValidationError.single("topic", f"{exc}: check the name on the topics page") from exc
        if seek.partition >= len(partitions):
            raise ServiceValidationError.single(
                "partition",
                f"topic {topic} has partitions 0 to {len(partitions) - 1}: partition {seek.partition} "
                "does not exist",
            )
        _untrusted_end(partitions[seek.partition], notes)
        start = _start_offset(browser, topic, seek, partitions[seek.partition], notes)
        if start is None:
            return partitions, None, None
        page = browser.read(topic, seek.partition, start=start, max_records=seek.max_records)
        if seek.timestamp_ms is not None:
            page, start = _from_moment(browser, topic, seek, page, start, moment_ms=seek.timestamp_ms)
        return partitions, start, page

    (partitions, start, page), read_at, read_ms = timed(lambda: cluster_read(cluster, read))
    records = [] if page is None else page.records
    if start is None and seek.timestamp_ms is not None:
        notes.append("no record at or after that time in this partition")
    elif page is not None and not page.complete:
        notes.append(
            f"the read stopped at its time limit after {read_ms / 1000:.1f} s with {len(records)} record(s)"
        )
    elif not records:
        notes.append(f"no record at or after offset {start} yet")
    return _RawPage(partitions, start, records, page is None or page.complete, read_at, read_ms, notes)


def topic_records(*, cluster: Cluster, topic: str, seek: Seek, role: Role | None) -> RecordPage:
    """The topic's partitions and at most `seek.max_records` records of `seek.partition` from the seek."""
    raw = _read_page(cluster, topic, seek)
    masked = masks_values(topic=topic, role=role)
    decoder = record_decoder(cluster) if raw.records and seek.format is ValueFormat.AUTO else None
    records = [shown(record, fmt=seek.format, masked=masked, decoder=decoder) for record in raw.records]
    return RecordPage(
        cluster=cluster,
        topic=topic,
        partitions=raw.partitions,
        seek=seek,
        start_offset=raw.start_offset,
        records=records,
        complete=raw.complete,
        masked=masked,
        mirrors=mirrors_by_topic(cluster=cluster, topics=[topic])[topic],
        read_at=raw.read_at,
        read_ms=raw.read_ms,
        notes=raw.notes + ([decoder.note] if decoder and decoder.note else []),
    )


# -- side by side -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShownCopy:
    source: ShownRecord
    target_offset: int | None
    copy: ShownRecord | None
    state: CopyState
    differences: tuple[str, ...]
    located_by: str  # "offset_sync" (translated exactly) or "content" (found past the newest sync)

    def to_dict(self) -> dict:
        return {
            "source": self.source.to_dict(),
            "target_offset": self.target_offset,
            "target": None if self.copy is None else self.copy.to_dict(),
            "state": self.state.value,
            "differences": list(self.differences),
            "located_by": self.located_by,
        }


@dataclass
class CopyPage:
    flow: Flow
    topic: str
    remote_topic: str
    seek: Seek
    copies: list[ShownCopy]
    masked: bool
    read_at: datetime.datetime
    read_ms: float
    notes: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for copy in self.copies:
            counts[copy.state.value] = counts.get(copy.state.value, 0) + 1
        return counts


def _remote_topic(flow: Flow, topic: str) -> str:
    decision = engine.topic_selection(flow, known_aliases=_aliases()).decide(topic)
    if not decision.replicate or not decision.remote_topic:
        raise ServiceValidationError.single(
            "topic", f"flow {flow.name} does not replicate topic {topic!r}: pick a topic it mirrors"
        )
    return decision.remote_topic


def record_copies(*, flow: Flow, topic: str, seek: Seek, role: Role | None) -> CopyPage:
    """Source records of `topic` from the seek (at most `seek.max_records`), each beside the record at its
    translated offset on the target (exact, from the flow's offset syncs), equal or not. The source is read
    as the topic page reads it (`_read_page`: from the end a fetch finds, `TopicReads.partition_offsets`);
    the target forward to the end its fetch finds, never to a listed end."""
    if error := topic_name_error(topic):
        raise ServiceValidationError.single("topic", error)
    remote_topic = _remote_topic(flow, topic)
    source = _read_page(flow.source, topic, seek)
    key = (remote_topic, seek.partition)
    notes = list(source.notes)

    def read_target(configs: list[ClusterConfig], timeout_s: float):
        config = configs[0]
        reader = engine.flow_reader(flow, timeout_s=timeout_s)
        try:
            store = reader.refresh_offset_syncs()
            if not reader.offset_syncs_complete:
                notes.append(
                    f"the offset syncs were not read to their end within {timeout_s:g} s: records past the "
                    "last sync read are looked for by content, reading forward from it"
                )
        finally:
            reader.close()
        span = target_read(store, source.records)
        if span is None:
            return store, []
        pages = (
            clusters()
            .topic_reads(config, timeout_s=timeout_s)
            .read_many(
                {key: span.first},
                max_records=span.records,
                stop_before=None if span.stop_before is None else {key: span.stop_before},
            )
        )
        return store, pages[key].records

    (store, target_records), read_at, read_ms = timed(
        lambda: clusters_read([flow.target, flow.source], read_target)
    )
    masked = masks_copy_values(topic=topic, remote_topic=remote_topic, role=role)
    pairs = compare_copies(
        store=store,
        source_records=source.records,
        target_records=target_records,
        schema_ids=runtime.rewritten_schema_ids(flow_id=flow.pk, mode=flow.schemas_sync_mode),
    )
    copies = [
        ShownCopy(
            source=shown(pair.source, fmt=seek.format, masked=masked),
            target_offset=pair.target_offset,
            copy=None if pair.copy is None else shown(pair.copy, fmt=seek.format, masked=masked),
            state=pair.state,
            differences=pair.differences,
            located_by=pair.located_by,
        )
        for pair in pairs
    ]
    return CopyPage(
        flow=flow,
        topic=topic,
        remote_topic=remote_topic,
        seek=seek,
        copies=copies,
        masked=masked,
        read_at=source.read_at,
        read_ms=round(source.read_ms + read_ms, 1),
        notes=notes,
    )
