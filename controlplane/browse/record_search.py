"""The message browser's search: records of every partition of a topic whose key, value, JSON path,
header or time match, read within bounds a web request can afford.

A search reads at most MIRRORPLANE_BROWSE_MAX_SCANNED records (or the `max_scanned` asked for, never
more), shared between the partitions: the newest records of each, or from the first record at `since`;
never past `until`. Every read goes through `cluster_reads.cluster_read`, so it also stops at
MIRRORPLANE_WEB_READ_TIMEOUT_S; the page says how many records it read, where in each partition, and
whether it stopped at a bound before the range's end. Only matching records are held in memory (at most
`max_records` + 1). Whatever a producer wrote (binary, huge, not UTF-8, bad JSON) is searched as bytes
and never fails the request (`replication.record_search`). A viewer cannot search the values of a
masked topic: that would show them one question at a time.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from django.conf import settings

from controlplane.browse.records import ShownRecord, masks_values, shown
from controlplane.browse.seek import MAX_RECORDS, parse_moment, topic_name_error
from controlplane.core import call_bounds
from controlplane.core.bounds import whole_number
from controlplane.core.errors import ServiceValidationError
from controlplane.core.roles import Role
from controlplane.flows.cluster_reads import cluster_read, timed
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster
from replication.browse import KafkaRecord, PartitionOffsets, ValueFormat
from replication.cluster_ports import TopicReads, UnknownTopic
from replication.config import ClusterConfig
from replication.record_search import (
    RecordFilter,
    ScanRange,
    SearchInputError,
    json_expectation,
    parse_json_path,
    scan_ranges,
    tail_ranges,
)

DEFAULT_MATCHES = 50
SEARCH_PARAMETERS = (
    "key",
    "value",
    "json_path",
    "json_value",
    "header",
    "since",
    "until",
    "max_scanned",
    "max_records",
    "format",
)


def max_scanned_bound() -> int:
    return max(settings.MIRRORPLANE_BROWSE_MAX_SCANNED, 1)


@dataclass(frozen=True)
class Search:
    filter: RecordFilter
    max_scanned: int
    max_records: int = DEFAULT_MATCHES
    format: ValueFormat = ValueFormat.AUTO
    asked: tuple[tuple[str, str], ...] = ()  # the parameters as given (to page on, to export)

    def to_dict(self) -> dict:
        return {**dict(self.asked), "max_scanned": self.max_scanned, "max_records": self.max_records}


def _moment(params: Mapping, name: str, errors: dict) -> int | None:
    raw = str(params.get(name, "") or "").strip()
    if not raw:
        return None
    try:
        moment = parse_moment(raw)
    except ValueError:
        moment = -1
    if moment < 0:
        errors[name] = [
            f"'{raw[:60]}' is not a time: give ISO 8601 (2026-11-24T05:30:00, with or without a zone) "
            "or epoch milliseconds, not before 1970"
        ]
        return None
    return moment


def _number(params: Mapping, name: str, errors: dict, *, default: int, maximum: int, fix: str) -> int:
    raw = str(params.get(name, "") or "").strip()
    if not raw:
        return default
    try:
        return whole_number(raw, field=name, minimum=1, maximum=maximum, fix=fix)
    except ServiceValidationError as exc:
        errors |= exc.errors
        return default


def parse_search(params: Mapping) -> Search:
    """A Search from query parameters (SEARCH_PARAMETERS); a 400 names each bad one and its fix."""
    errors: dict[str, list[str]] = {}
    text = {name: str(params.get(name, "") or "") for name in SEARCH_PARAMETERS}
    json_path: tuple = ()
    if text["json_path"].strip():
        try:
            json_path = parse_json_path(text["json_path"])
        except SearchInputError as exc:
            errors[exc.field] = [str(exc)]
    if text["json_value"] and not text["json_path"].strip():
        errors["json_value"] = ["give the json_path whose value this is, e.g. $.order.id"]
    header, _, header_value = text["header"].partition("=")
    if text["header"] and not header.strip():
        errors["header"] = ["give the header's name, or name=value"]
    since, until = _moment(params, "since", errors), _moment(params, "until", errors)
    if since is not None and until is not None and until <= since:
        errors.setdefault("until", []).append("give an until after since")
    bound = max_scanned_bound()
    max_scanned = _number(
        params, "max_scanned", errors, default=bound, maximum=bound, fix=f"give 1 to {bound} records to read"
    )
    max_records = _number(
        params,
        "max_records",
        errors,
        default=DEFAULT_MATCHES,
        maximum=MAX_RECORDS,
        fix=f"give 1 to {MAX_RECORDS}",
    )
    try:
        fmt = ValueFormat(text["format"] or ValueFormat.AUTO.value)
    except ValueError:
        errors["format"] = [f"'{text['format'][:40]}' is not a format: use one of auto, text, json, hex"]
        fmt = ValueFormat.AUTO
    if errors:
        raise ServiceValidationError(errors)
    record_filter = RecordFilter(
        key=text["key"].encode() if text["key"] else None,
        value=text["value"].encode() if text["value"] else None,
        json_path=json_path,
        **({"json_value": json_expectation(text["json_value"])} if text["json_value"] else {}),
        header=header.strip() or None,
        header_value=header_value.encode() if header.strip() and "=" in text["header"] else None,
        since_ms=since,
        until_ms=until,
    )
    asked = tuple((name, value) for name, value in text.items() if value and name in params)
    return Search(record_filter, max_scanned, max_records, fmt, asked)


@dataclass(frozen=True)
class ScannedPartition:
    partition: int
    start: int  # the first offset read
    stop: int  # the range's end: the partition's end, or the first offset at `until`
    scanned: int  # records read
    complete: bool  # read to `stop` (False: a bound came first)
    next_offset: int  # where a read on from here starts (a live tail's position)
    skipped: int = 0  # a live tail's records left unread: more came than its budget

    def to_dict(self) -> dict:
        return vars(self).copy()


@dataclass
class SearchPage:
    cluster: Cluster
    topic: str
    search: Search
    partitions: list[ScannedPartition]
    records: list[ShownRecord]
    more: bool  # more matches were found than `max_records` shows
    masked: bool
    read_at: datetime.datetime
    read_ms: float
    notes: list[str] = field(default_factory=list)
    found: list[KafkaRecord] = field(default_factory=list)  # the records shown, as read (for an export)

    @property
    def scanned(self) -> int:
        return sum(p.scanned for p in self.partitions)

    @property
    def complete(self) -> bool:
        return all(p.complete for p in self.partitions) and not self.more

    @property
    def positions(self) -> str:
        """Each partition's next offset, `0:120,1:98`: where a live tail goes on."""
        return ",".join(f"{p.partition}:{p.next_offset}" for p in self.partitions)

    def to_dict(self) -> dict:
        return {
            "cluster": self.cluster.alias,
            "topic": self.topic,
            "read_at": self.read_at.isoformat(),
            "read_ms": self.read_ms,
            "search": self.search.to_dict(),
            "scanned": self.scanned,
            "complete": self.complete,
            "more": self.more,
            "masked": self.masked,
            "notes": self.notes,
            "positions": self.positions,
            "partitions": [p.to_dict() for p in self.partitions],
            "records": [r.to_dict() for r in self.records],
        }


RangesOf = Callable[[TopicReads, list[PartitionOffsets]], list[ScanRange]]


MATCHED_BYTES_MAX = 32 << 20  # the most bytes of matching records a search holds (a page, an export)


class _Matches:
    """`search.filter.matches`, holding at most MATCHED_BYTES_MAX bytes of matches: past it a match is
    counted (`dropped`), not kept, so 500 matches of 1 MB each never fill a web worker's memory."""

    def __init__(self, search: Search) -> None:
        self.filter = search.filter
        self.kept_bytes = 0
        self.dropped = 0

    def __call__(self, record: KafkaRecord) -> bool:
        if not self.filter.matches(record):
            return False
        size = (
            len(record.key or b"") + len(record.value or b"") + sum(len(v or b"") for _, v in record.headers)
        )
        if self.kept_bytes + size > MATCHED_BYTES_MAX:
            self.dropped += 1
            return False
        self.kept_bytes += size
        return True


def _scan(config: ClusterConfig, timeout_s: float, *, topic: str, search: Search, ranges_of: RangesOf):
    browser = clusters().topic_reads(config, timeout_s=timeout_s)
    try:
        offsets: list[PartitionOffsets] = browser.partition_offsets(topic)
    except UnknownTopic as exc:
        raise ServiceValidationError.single("topic", f"{exc}: check the name on the topics page") from exc
    ranges = ranges_of(browser, offsets)
    reading = {(topic, r.partition): r for r in ranges if not r.empty}
    matches = _Matches(search)
    pages = browser.read_many(
        {key: r.start for key, r in reading.items()},
        max_records=max((r.budget for r in reading.values()), default=0),
        stop_before={key: r.stop for key, r in reading.items()},
        keep=matches,
        max_kept=search.max_records + 1,
    )
    return offsets, ranges, pages, matches.dropped


def _scanned(r: ScanRange, page) -> ScannedPartition:
    if page is None:
        return ScannedPartition(r.partition, r.start, r.stop, 0, True, r.start, r.skipped)
    # Read to the range's end: the last record read is its last, or the partition ended before the budget.
    done = (page.position is not None and page.position >= r.stop) or (
        page.complete and page.scanned < r.budget
    )
    position = r.stop if done else (page.position if page.position is not None else r.start)
    return ScannedPartition(r.partition, r.start, r.stop, page.scanned, done, position, r.skipped)


def _refuse_masked_values(*, topic: str, search: Search, masked: bool) -> None:
    if masked and search.filter.reads_values:
        field_name = next(n for n in ("value", "json_path", "header") if dict(search.asked).get(n))
        raise ServiceValidationError.single(
            field_name,
            f"the values of {topic} are masked for your role: search it by key, header name or time, or ask "
            "an operator",
        )


def _read(
    cluster: Cluster,
    topic: str,
    search: Search,
    role: Role | None,
    ranges_of: RangesOf,
    *,
    newest_first: bool,
):
    """The bounded read both a search and a tail make, as a SearchPage, and the partitions' offsets."""
    if error := topic_name_error(topic):
        raise ServiceValidationError.single("topic", error)
    masked = masks_values(topic=topic, role=role)
    _refuse_masked_values(topic=topic, search=search, masked=masked)
    (offsets, ranges, pages, dropped), read_at, read_ms = timed(
        lambda: cluster_read(
            cluster,
            lambda config, timeout_s: _scan(
                config, timeout_s, topic=topic, search=search, ranges_of=ranges_of
            ),
        )
    )
    found = sorted(
        (record for page in pages.values() for record in page.records),
        key=lambda r: (r.timestamp_ms is None, r.timestamp_ms or 0, r.partition, r.offset),
        reverse=newest_first,
    )[: search.max_records + 1]
    partitions = [_scanned(r, pages.get((topic, r.partition))) for r in ranges]
    page = SearchPage(
        cluster=cluster,
        topic=topic,
        search=search,
        partitions=partitions,
        records=[shown(r, fmt=search.format, masked=masked) for r in found[: search.max_records]],
        found=found[: search.max_records],
        more=len(found) > search.max_records or dropped > 0,
        masked=masked,
        read_at=read_at,
        read_ms=read_ms,
    )
    if dropped:
        page.notes.append(
            f"{dropped:,} more matching record(s) not kept: the matches reached {MATCHED_BYTES_MAX >> 20} MiB; "
            "narrow the search"
        )
    elif page.more:
        page.notes.append(f"more than {search.max_records} records match: narrow the search or show more")
    elif unread := [p.partition for p in partitions if not p.complete]:
        page.notes.append(
            f"stopped at a bound ({call_bounds.budget_s():g} s or {search.max_scanned:,} records read) before the "
            f"end of the range in partition(s) {', '.join(map(str, unread))}: narrow the time range"
        )
    return offsets, ranges, page


def topic_search(*, cluster: Cluster, topic: str, search: Search, role: Role | None) -> SearchPage:
    """The records of every partition of `topic` that `search` keeps, newest ranges first unless it
    gives `since`; at most `search.max_records` shown, in time order."""
    flt = search.filter

    def ranges_of(browser: TopicReads, offsets: list[PartitionOffsets]) -> list[ScanRange]:
        keys = [(topic, p.partition) for p in offsets]

        def at(moment: int | None) -> dict[int, int] | None:
            return (
                None if moment is None else {p: o for (_, p), o in browser.offsets_at(keys, moment).items()}
            )

        return scan_ranges(
            offsets, max_scanned=search.max_scanned, since=at(flt.since_ms), until=at(flt.until_ms)
        )

    offsets, ranges, page = _read(cluster, topic, search, role, ranges_of, newest_first=False)
    if flt.since_ms is None and any(r.start > o.earliest for o, r in zip(offsets, ranges, strict=True)):
        page.notes.append(
            "only the newest records of each partition were searched (the offsets below): give since to "
            "search older ones"
        )
    return page


def parse_positions(raw: str) -> dict[int, int] | None:
    """A live tail's positions, `0:120,1:98` (SearchPage.positions); empty: none yet."""
    if not raw.strip():
        return None
    positions = {}
    for item in raw.split(","):
        partition, _, offset = item.partition(":")
        try:
            positions[int(partition)] = int(offset)
        except ValueError:
            raise ServiceValidationError.single(
                "positions", f"'{item[:40]}' is not partition:offset: give them as 0:120,1:98"
            ) from None
    if any(p < 0 or o < 0 for p, o in positions.items()) or len(positions) > 100_000:
        raise ServiceValidationError.single(
            "positions", "partitions and offsets are 0 or more: give 0:120,1:98"
        )
    return positions


def topic_tail(
    *, cluster: Cluster, topic: str, search: Search, positions: str, role: Role | None
) -> SearchPage:
    """A live tail's next read: what came after `positions` in every partition (nothing the first time:
    the page's `positions` are then the ends), filtered by `search`, newest first, within the same
    bounds as a search (past its share a partition's backlog is skipped and counted)."""
    known = parse_positions(positions)
    _, _, page = _read(
        cluster,
        topic,
        search,
        role,
        lambda _browser, offsets: tail_ranges(offsets, positions=known, max_scanned=search.max_scanned),
        newest_first=True,
    )
    if skipped := sum(p.skipped for p in page.partitions):
        page.notes.append(f"{skipped:,} records came faster than the tail reads: skipped, not searched")
    return page
