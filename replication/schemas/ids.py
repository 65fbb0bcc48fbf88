"""`rewrite-ids`: the schema ID in each mirrored record's key and value becomes the target registry's ID
of the same schema.

The mapping (source ID -> target ID) is derived from the two registries, which are its durable store: a
source ID's (subject, version) pairs come from the source registry, and the target's ID is what a lookup
of that schema under the renamed subject answers. A task keeps the answers it got, so a restart rebuilds
the mapping by asking again, and an ID that meant one schema keeps meaning it (registries never reuse an
ID). A record whose schema is not on the target yet is never sent with a wrong ID: `rewrite` raises
`SchemaWait` and the task holds the partition at that record until the schema sync registers it
(asked again at most every `retry_s` per ID). A payload not in the wire format, or naming an ID the
source registry does not know (a payload that merely starts with a zero byte), passes unchanged.

`keep_ids` (the `keep-ids` mode) rewrites nothing but holds the same way: a record passes only once the
target registry holds its schema under the very same ID. A record whose ID the target does not hold, or
uses for another schema (keep-ids refused), would otherwise be copied naming nothing, or the wrong schema.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from replication.schemas.rest import ConfluentRegistryClient, RegistryError
from replication.schemas.sync import renamed_schema
from replication.schemas.wire import schema_id_of, with_schema_id
from replication.task_io import SchemaWait

RETRY_S = 1.0
_NOT_A_SCHEMA = -1  # the source registry does not know the ID: the payload is not a registry record


class SchemaIdRewriter:
    """Rewrites the schema ID of wire-format payloads, one registry lookup per source ID."""

    def __init__(
        self,
        *,
        source: ConfluentRegistryClient,
        target: ConfluentRegistryClient,
        rename: Callable[[str], str | None],
        retry_s: float = RETRY_S,
        clock: Callable[[], float] = time.monotonic,
        keep_ids: bool = False,
        refused: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        self._source, self._target, self._rename = source, target, rename
        self._keep_ids = keep_ids
        self._refused = refused
        self._retry_s, self._clock = retry_s, clock
        self._target_ids: dict[int, int] = {}
        self._missing: dict[int, tuple[float, str]] = {}  # source ID -> (when asked, why not there)

    @property
    def id_map(self) -> dict[int, int]:
        """Source ID -> target ID, as resolved so far (IDs of non-registry payloads left out)."""
        return {source: target for source, target in self._target_ids.items() if target != _NOT_A_SCHEMA}

    def rewrite(self, payload: bytes | None) -> bytes | None:
        """`payload` naming the target's ID of its schema; `SchemaWait` when that is not known yet."""
        source_id = schema_id_of(payload)
        if payload is None or source_id is None:
            return payload
        target_id = self._target_ids.get(source_id)
        if target_id is None:
            target_id = self._resolve(source_id)
        if target_id in (_NOT_A_SCHEMA, source_id):
            return payload
        return with_schema_id(payload, target_id)

    def _resolve(self, source_id: int) -> int:
        missing = self._missing.get(source_id)
        now = self._clock()
        if missing is not None and now - missing[0] < self._retry_s:
            raise SchemaWait(source_id, missing[1])
        try:
            target_id, subjects = self._lookup(source_id)
        except RegistryError as exc:
            target_id, reason = None, f"lookup failed: {exc}"
        else:
            reason = "not on the target registry yet (waiting for the schema sync)"
            if self._keep_ids and target_id not in (None, _NOT_A_SCHEMA, source_id):
                target_id, reason = (
                    None,
                    f"on the target registry under ID {target_id}, not its own (keep-ids)",
                )
            elif target_id is None:
                reason = (
                    self._sync_refusal(subjects)
                    or (self._keep_ids_refusal(source_id) if self._keep_ids else None)
                    or reason
                )
        if target_id is None:
            self._missing[source_id] = (now, reason)
            raise SchemaWait(source_id, reason)
        self._missing.pop(source_id, None)
        self._target_ids[source_id] = target_id
        return target_id

    def _keep_ids_refusal(self, source_id: int) -> str | None:
        """keep-ids: why the schema sync can never register the schema under its own ID, when it cannot
        (the sync refuses for the same reason): the target registry uses the ID for another schema. The
        hold then names that, not a wait for the sync."""
        try:
            held = self._target.schema_by_id(source_id)
            schema = self._source.schema_by_id(source_id)
        except RegistryError:
            return None
        if held is None or schema is None or held.same_as(renamed_schema(schema, self._rename)):
            return None
        return (
            f"the target registry uses ID {source_id} for another schema, so the schema sync refuses to "
            "register it under its own ID (keep-ids): free the ID on the target, or use rewrite-ids"
        )

    def _sync_refusal(self, subjects: tuple[str, ...]) -> str | None:
        """Why the schema sync refuses a subject of the schema, as its latest pass said (`refused`: source
        subject -> reason), when it does: the hold names that rather than a wait for the sync."""
        refused = self._refused() if self._refused is not None else {}
        for subject in subjects:
            if subject in refused:
                return f"the schema sync refuses subject {refused[subject]}"
        return None

    def _lookup(self, source_id: int) -> tuple[int | None, tuple[str, ...]]:
        """(the target's ID of the source schema, `_NOT_A_SCHEMA`, or None when the target lacks it; the
        source subjects the schema is a version of)."""
        schema = self._source.schema_by_id(source_id)
        if schema is None:
            return _NOT_A_SCHEMA, ()
        # Soft-deleted versions too: records written before the delete still name them.
        subjects = tuple(subject for subject, _ in self._source.subject_versions_of(source_id, deleted=True))
        for subject in subjects:
            target_subject = self._rename(subject)
            if target_subject is None:
                continue
            found = self._target.lookup(target_subject, renamed_schema(schema, self._rename), deleted=True)
            if found is not None:
                return found.schema_id, subjects
        return None, subjects
