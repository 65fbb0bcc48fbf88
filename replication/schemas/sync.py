"""Schema sync: every version of every subject a flow syncs, registered on the target registry in order.

Two ID modes, as the field names them:

- `rewrite-ids`: each version is registered on the target wherever the target puts it; the records'
  IDs are rewritten while they are replicated (`replication.schemas.ids`). Works with any registry.
- `keep-ids`: each version is registered under its source ID and version, the target subject in IMPORT
  mode (Confluent Schema Linking, Redpanda Shadowing). Refused before registering when the target has no
  IMPORT mode (Apicurio 2.6) or already uses the ID for another schema; a registry that takes IMPORT mode
  yet registers under an ID of its own (Apicurio 3.3's ccompat API, seen here) is caught at its first
  registration, which stays on the target under the target's ID: the subject stops there, reported.

A pass is idempotent: a version already on the target (the same schema under the renamed subject) is
found by a lookup and not registered again, so each pass costs a lookup per source version and a
registration per new one; run it on a schedule (a metadata task, like topic configs). The subject's own
compatibility level follows after its versions (set before, a stricter level could refuse versions the
source accepted under an older one). References keep their version number and follow their subject's
renaming, so a referenced subject must be synced first: subjects are visited referenced-first.

Soft deletes follow the source: a version soft-deleted there is soft-deleted on the target too, after it
was registered there if it never was, so the records that name it keep a target ID that resolves (a
soft-deleted schema is still readable by ID, which is what a deserializer asks). A subject with no live
version left is soft-deleted whole on the target. A version the target itself soft-deleted stays deleted
(the lookups include soft-deleted versions, so it is not registered again). Permanent deletes are not
followed: the target's topic still holds records naming the schema.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from replication.config import SchemaIdMode
from replication.schemas.rest import ConfluentRegistryClient, Reference, RegistryError, Schema

log = logging.getLogger(__name__)

IMPORT_MODE = "IMPORT"


class SchemaIdConflict(RuntimeError):
    """keep-ids cannot hold for this version: the message says which ID, which schemas, and why."""


@dataclass
class SchemaSyncResult:
    """What one pass did and what it could not do."""

    subjects: dict[str, str] = field(default_factory=dict)  # source subject -> target subject, synced
    registered: int = 0  # versions registered on the target by this pass
    deleted: int = 0  # versions soft-deleted on the target by this pass (soft-deleted on the source)
    versions_behind: int = 0  # source versions not on the target after this pass
    id_map: dict[int, int] = field(default_factory=dict)  # source ID -> target ID, of the versions seen
    errors: list[str] = field(default_factory=list)
    # source subject -> why the sync refuses it until someone acts (keep-ids impossible on the target, the
    # target refusing the schema itself); not a registry that does not answer, which the next pass retries
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors


def renamed_schema(schema: Schema, rename: Callable[[str], str | None]) -> Schema:
    """`schema` with its references pointing at the target's names of their subjects."""
    if not schema.references:
        return schema
    return Schema(
        schema=schema.schema,
        schema_type=schema.schema_type,
        references=tuple(
            Reference(name=ref.name, subject=rename(ref.subject) or ref.subject, version=ref.version)
            for ref in schema.references
        ),
    )


def sync_schemas(
    *,
    source: ConfluentRegistryClient,
    target: ConfluentRegistryClient,
    rename: Callable[[str], str | None],
    mode: SchemaIdMode,
) -> SchemaSyncResult:
    """One pass over the source registry's subjects that `rename` keeps (it names them on the target)."""
    sync = _SyncPass(source=source, target=target, rename=rename, mode=mode)
    try:
        subjects = source.subjects(deleted=True)
    except RegistryError as exc:
        sync.result.errors.append(f"listing the source registry's subjects: {exc}")
        return sync.result
    for subject in sorted(subjects):
        sync.subject(subject)
    return sync.result


@dataclass
class _SyncPass:
    source: ConfluentRegistryClient
    target: ConfluentRegistryClient
    rename: Callable[[str], str | None]
    mode: SchemaIdMode
    result: SchemaSyncResult = field(default_factory=SchemaSyncResult)
    visited: set[str] = field(default_factory=set)

    def subject(self, subject: str) -> None:
        """Sync `subject` once per pass (a reference visits its subject first)."""
        if subject in self.visited:
            return
        self.visited.add(subject)
        target_subject = self.rename(subject)
        if target_subject is None:
            return
        self.result.subjects[subject] = target_subject
        versions: list[int] = []
        synced = 0
        try:
            versions = self.source.versions(subject, deleted=True)
            live = set(self.source.versions(subject))
            if not live:  # deleted whole (Apicurio then serves its versions by ID only)
                if self.target.versions(target_subject):
                    self.result.deleted += len(self.target.soft_delete_subject(target_subject))
                return
            for number in versions:
                self._version(subject, number, target_subject)
                if number not in live:
                    self._soft_delete(subject, number, target_subject)
                synced += 1
            level = self.source.compatibility(subject)
            if level is not None and self.target.compatibility(target_subject) != level:
                self.target.set_compatibility(target_subject, level)
        except (RegistryError, SchemaIdConflict) as exc:
            self.result.versions_behind += len(versions) - synced
            self.result.errors.append(f"subject {subject} -> {target_subject}: {exc}")
            if is_refusal(exc):
                self.result.refused[subject] = f"{target_subject}: {exc}"
            log.warning("schema sync: subject %s -> %s: %s", subject, target_subject, exc)

    def _soft_delete(self, subject: str, number: int, target_subject: str) -> None:
        """Soft-delete on the target the version `number` of `subject` the source soft-deleted."""
        schema = renamed_schema(self.source.version(subject, number, deleted=True).schema, self.rename)
        live = self.target.lookup(target_subject, schema)
        if live is not None:
            self.target.soft_delete(target_subject, live.version)
            self.result.deleted += 1

    def _version(self, subject: str, number: int, target_subject: str) -> None:
        version = self.source.version(subject, number, deleted=True)
        for ref in version.schema.references:
            self.subject(ref.subject)
        schema = renamed_schema(version.schema, self.rename)
        found = self.target.lookup(target_subject, schema, deleted=True)
        if found is not None:
            if self.mode == SchemaIdMode.KEEP_IDS and found.schema_id != version.schema_id:
                raise SchemaIdConflict(
                    f"version {number} (ID {version.schema_id}) is on the target under ID "
                    f"{found.schema_id}: the target registry already had this schema under an ID of its own"
                )
            self.result.id_map[version.schema_id] = found.schema_id
            return
        if self.mode == SchemaIdMode.REWRITE_IDS:
            self.result.id_map[version.schema_id] = self.target.register(target_subject, schema)
            self.result.registered += 1
            return
        _enter_import_mode(self.target, target_subject)
        conflict = id_conflict(self.target, version.schema_id, schema)
        if conflict:
            raise SchemaIdConflict(conflict)
        registered = self.target.register(target_subject, schema, schema_id=version.schema_id, version=number)
        if registered != version.schema_id:
            raise SchemaIdConflict(
                f"the target registry registered version {number} under ID {registered}, not its source "
                f"ID {version.schema_id}: it does not register under a given ID, so keep-ids cannot hold "
                "(use rewrite-ids)"
            )
        self.result.id_map[version.schema_id] = registered
        self.result.registered += 1


def is_refusal(exc: Exception) -> bool:
    """Whether the sync's failure lasts until someone acts: a keep-ids conflict, or the target registry
    refusing the schema itself (HTTP 409 incompatible, 422 invalid); not a registry that did not answer."""
    return isinstance(exc, SchemaIdConflict) or (
        isinstance(exc, RegistryError) and not exc.not_asked and exc.status in (409, 422)
    )


def id_conflict(target: ConfluentRegistryClient, schema_id: int, schema: Schema) -> str | None:
    """Why `schema` cannot keep `schema_id` on the target (the ID taken by another schema), or None."""
    taken = target.schema_by_id(schema_id)
    if taken is None or taken.same_as(schema):
        return None
    return (
        f"the target registry already uses ID {schema_id} for another schema: keep-ids cannot hold "
        "(give the registries disjoint ID ranges, or use rewrite-ids)"
    )


def _enter_import_mode(target: ConfluentRegistryClient, subject: str) -> None:
    try:
        mode = target.set_mode(subject, IMPORT_MODE)
    except RegistryError as exc:
        raise SchemaIdConflict(
            f"the target registry has no IMPORT mode for {subject} ({exc}): keep-ids cannot register under "
            "the source IDs (use rewrite-ids)"
        ) from None
    if mode != IMPORT_MODE:
        raise SchemaIdConflict(f"the target registry answered mode {mode} for {subject}, not IMPORT")
