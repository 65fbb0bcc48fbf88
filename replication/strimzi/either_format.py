"""An mm2.properties text or a KafkaMirrorMaker2 resource, whichever a text is: what the web import,
`python -m replication run` and the benchmarks read."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from replication.config import Mm2Config
from replication.mm2file import (
    MM2_PLACEHOLDERS,
    Mm2FileError,
    ParsedMm2,
    Placeholders,
    missing_placeholders_of_entries,
    parse_mm2,
)
from replication.mm2file import missing_placeholders as missing_placeholders_of_properties
from replication.strimzi.reading import ResourceReader, parse_strimzi
from replication.strimzi.resource import is_strimzi_resource

logger = logging.getLogger(__name__)


def parse_mirrormaker(
    text: str,
    *,
    source_name: str = "mm2.properties",
    environ: Mapping[str, str] | None = None,
    placeholders: Placeholders = MM2_PLACEHOLDERS,
) -> ParsedMm2:
    """An mm2.properties text or a KafkaMirrorMaker2 resource, whichever `text` is; Mm2FileError lists
    every problem."""
    parse = parse_strimzi if is_strimzi_resource(text) else parse_mm2
    return parse(text, source_name=source_name, environ=environ, placeholders=placeholders)


def load_mm2_file(path: str | os.PathLike[str]) -> Mm2Config:
    """Parse an mm2.properties file, or a Strimzi KafkaMirrorMaker2 resource (UTF-8), logging its warnings."""
    parsed = parse_mirrormaker(Path(path).read_text(encoding="utf-8"), source_name=str(path))
    for warning in parsed.warnings:
        logger.warning("%s", warning)
    return parsed.config


def missing_placeholders(text: str, *, environ: Mapping[str, str]) -> list[str]:
    """The `${env:VAR}` placeholders (Secrets' values included) `text` reads that `environ` lacks, for
    either format; a text that cannot be read lists none (parsing reports why)."""
    if not is_strimzi_resource(text):
        return missing_placeholders_of_properties(text, environ=environ)
    try:
        entries = ResourceReader.read(text, source_name="resource").entries()
    except Mm2FileError:
        return []
    return missing_placeholders_of_entries(entries, environ=environ)
