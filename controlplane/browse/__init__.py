"""Browse: topics and records (this module's names), consumer groups (`controlplane.browse.groups`), offset
mapping (`controlplane.browse.offset_mapping`), and the bounded Kafka reads a web request makes
(`controlplane.browse.cluster_reads`)."""

from controlplane.browse.records import (
    DEFAULT_RECORDS,
    MAX_RECORDS,
    TOPIC_NAME,
    CopyPage,
    Mirror,
    RecordPage,
    Seek,
    ShownCopy,
    ShownRecord,
    TopicList,
    ValueFormat,
    masks_values,
    mirrors_by_topic,
    parse_moment,
    parse_seek,
    record_copies,
    shown,
    topic_list,
    topic_name_error,
    topic_records,
)

__all__ = [
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
