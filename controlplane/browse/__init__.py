"""Browse: topics and records (this module's names; where to read: `controlplane.browse.seek`), a topic's
and a cluster's details with what config sync will change (`controlplane.browse.topic_details`), the search across a topic's partitions
(`controlplane.browse.record_search`), consumer groups (`controlplane.browse.groups`, their offset reset
and deletion `controlplane.browse.group_changes`), offset mapping (`controlplane.browse.offset_mapping`);
their Kafka reads go through `controlplane.flows.cluster_reads`."""

from controlplane.browse.records import (
    CopyPage,
    Mirror,
    RecordPage,
    ShownCopy,
    ShownRecord,
    TopicList,
    ValueFormat,
    event_detail_shown,
    masks_values,
    mirrors_by_topic,
    record_copies,
    shown,
    topic_list,
    topic_records,
)
from controlplane.browse.seek import (
    DEFAULT_RECORDS,
    MAX_RECORDS,
    TOPIC_NAME,
    Seek,
    parse_moment,
    parse_seek,
    topic_name_error,
)
from controlplane.browse.topic_details import (
    ClusterDetails,
    ConfigSync,
    TopicDetails,
    cluster_details,
    topic_details,
)
from controlplane.browse.topic_sizes import SizesOnDisk

__all__ = [
    "ClusterDetails",
    "ConfigSync",
    "TopicDetails",
    "SizesOnDisk",
    "cluster_details",
    "topic_details",
    "DEFAULT_RECORDS",
    "MAX_RECORDS",
    "TOPIC_NAME",
    "CopyPage",
    "Mirror",
    "RecordPage",
    "Seek",
    "ShownCopy",
    "ShownRecord",
    "TopicList",
    "ValueFormat",
    "event_detail_shown",
    "masks_values",
    "mirrors_by_topic",
    "parse_moment",
    "parse_seek",
    "record_copies",
    "shown",
    "topic_list",
    "topic_name_error",
    "topic_records",
]
