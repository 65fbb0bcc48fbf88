"""A client of the Confluent Schema Registry REST API (Confluent's registry, Apicurio's `/apis/ccompat/v7`,
Karapace, Redpanda): the calls the subject sync and the schema-ID rewrite make, nothing more.

Plain HTTP from the standard library: a sync makes a few calls per new schema version and the rewrite
caches every answer it acts on, so no connection pool is worth a dependency. Authentication is HTTP basic
(user and password) or a bearer token, as the registries accept.
"""

from __future__ import annotations

import base64
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from replication import outbound

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_TIMEOUT_S = 10.0
# Confluent's error codes the callers act on (the HTTP status alone is 404 for all of them).
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_CONFIG_NOT_FOUND = 40408


@dataclass(frozen=True)
class RegistryAuth:
    """Basic (`username`, `password`) or bearer (`token`) credentials; the secrets arrive resolved."""

    username: str | None = None
    password: str | None = None
    token: str | None = None

    def header(self) -> str | None:
        if self.token:
            return f"Bearer {self.token}"
        if self.username is not None:
            pair = f"{self.username}:{self.password or ''}".encode()
            return f"Basic {base64.b64encode(pair).decode()}"
        return None


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class Schema:
    """A schema as a registry stores it: its text, its type (AVRO when a registry names none) and references."""

    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema}
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [
                {"name": ref.name, "subject": ref.subject, "version": ref.version} for ref in self.references
            ]
        return body

    def same_as(self, other: Schema) -> bool:
        """The same schema, however a registry re-serialized its JSON (Avro, JSON Schema)."""
        if (self.schema_type, self.references) != (other.schema_type, other.references):
            return False
        if self.schema_type == "PROTOBUF":
            return self.schema.strip() == other.schema.strip()
        try:
            return json.loads(self.schema) == json.loads(other.schema)
        except ValueError:
            return self.schema == other.schema


@dataclass(frozen=True)
class SubjectVersion:
    subject: str
    version: int
    schema_id: int
    schema: Schema


class RegistryError(RuntimeError):
    """A registry refused or failed a call: `status` the HTTP status (0: no answer), `error_code` Confluent's;
    `not_asked`: the call was never made (no URL, or the outbound policy refused it), which says nothing
    about whether the registry answers."""

    not_asked = False

    def __init__(self, message: str, *, status: int = 0, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status, self.error_code = status, error_code


def _schema_of(body: dict[str, Any]) -> Schema:
    return Schema(
        schema=body["schema"],
        schema_type=body.get("schemaType") or "AVRO",
        references=tuple(
            Reference(name=ref["name"], subject=ref["subject"], version=int(ref["version"]))
            for ref in body.get("references") or ()
        ),
    )


def _deleted(deleted: bool) -> str:
    return "?deleted=true" if deleted else ""


@dataclass
class ConfluentRegistryClient:
    """One registry's Confluent API at `url` (e.g. `http://host:8081`, or Apicurio's `.../apis/ccompat/v7`)."""

    url: str
    auth: RegistryAuth | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    name: str = "the cluster"  # for messages: the cluster alias whose registry this is
    allowlist: outbound.HostAllowlist = field(default_factory=outbound.HostAllowlist.from_environ)
    _headers: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        self._headers = {"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE}
        authorization = self.auth.header() if self.auth else None
        if authorization:
            self._headers["Authorization"] = authorization

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The registry's JSON answer; RegistryError saying what happened as a class (HTTP 4xx, timed out,
        refused by the outbound policy), never the registry's own words (`replication.outbound`)."""
        if not self.url:
            error = RegistryError(f"no schema registry configured ({self.name} has no schema.registry.url)")
            error.not_asked = True
            raise error
        request = urllib.request.Request(
            self.url + path,
            method=method,
            headers=self._headers,
            data=None if body is None else json.dumps(body).encode(),
        )
        where = f"the schema registry of {self.name} ({method} {urllib.parse.urlsplit(self.url).path}{path})"
        try:
            return json.loads(
                outbound.fetch(request, allowlist=self.allowlist, timeout_s=self.timeout_s) or b"null"
            )
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read(65536) or b"{}")
            except ValueError:
                answer = {}
            code = answer.get("error_code") if isinstance(answer, dict) else None
            raise RegistryError(
                f"{where} {outbound.outcome(exc)}{f' (error code {code})' if isinstance(code, int) else ''}: "
                "check the registry's URL and credentials (schema.registry.*) and its log",
                status=exc.code,
                error_code=code,
            ) from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            error = RegistryError(f"{where} {outbound.outcome(exc)}")
            error.not_asked = isinstance(getattr(exc, "reason", exc), outbound.OutboundRefused)
            raise error from None

    @staticmethod
    def _quote(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    # -- reads ------------------------------------------------------------------------------------------
    # `deleted=True` includes what was soft-deleted (Confluent's `?deleted=true`): still readable, still
    # resolving its ID, no longer listed or looked up without it.
    def subjects(self, *, deleted: bool = False) -> list[str]:
        return list(self._call("GET", "/subjects" + _deleted(deleted)))

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        """The subject's versions, ascending; [] when the subject does not exist."""
        path = f"/subjects/{self._quote(subject)}/versions{_deleted(deleted)}"
        try:
            return sorted(int(v) for v in self._call("GET", path))
        except RegistryError as exc:
            if exc.status == 404:
                return []
            raise

    def version(self, subject: str, version: int, *, deleted: bool = False) -> SubjectVersion:
        body = self._call("GET", f"/subjects/{self._quote(subject)}/versions/{version}{_deleted(deleted)}")
        return SubjectVersion(
            subject=body.get("subject", subject),
            version=int(body["version"]),
            schema_id=int(body["id"]),
            schema=_schema_of(body),
        )

    def schema_by_id(self, schema_id: int) -> Schema | None:
        """The schema of an ID; None when the registry has no such ID."""
        try:
            return _schema_of(self._call("GET", f"/schemas/ids/{schema_id}"))
        except RegistryError as exc:
            if exc.status == 404:
                return None
            raise

    def subject_versions_of(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        """The (subject, version) pairs registered with an ID; [] when the registry has no such ID."""
        try:
            body = self._call("GET", f"/schemas/ids/{schema_id}/versions{_deleted(deleted)}")
        except RegistryError as exc:
            if exc.status == 404:
                return []
            raise
        return [(entry["subject"], int(entry["version"])) for entry in body]

    def lookup(self, subject: str, schema: Schema, *, deleted: bool = False) -> SubjectVersion | None:
        """The version of `subject` that holds `schema`; None when it holds no such version."""
        try:
            body = self._call(
                "POST", f"/subjects/{self._quote(subject)}{_deleted(deleted)}", schema.payload()
            )
        except RegistryError as exc:
            if exc.status == 404:
                return None
            raise
        return SubjectVersion(
            subject=body.get("subject", subject),
            version=int(body["version"]),
            schema_id=int(body["id"]),
            schema=schema,
        )

    def compatibility(self, subject: str) -> str | None:
        """The subject's own compatibility level; None when it has none (the global level applies)."""
        try:
            body = self._call("GET", f"/config/{self._quote(subject)}")
        except RegistryError as exc:
            if exc.status == 404:
                return None
            raise
        return body.get("compatibilityLevel") or body.get("compatibility")

    # -- writes -----------------------------------------------------------------------------------------
    def register(
        self, subject: str, schema: Schema, *, schema_id: int | None = None, version: int | None = None
    ) -> int:
        """Register `schema` under `subject`; its ID. `schema_id` / `version` ask for those (IMPORT mode)."""
        body = schema.payload()
        if schema_id is not None:
            body["id"] = schema_id
        if version is not None:
            body["version"] = version
        return int(self._call("POST", f"/subjects/{self._quote(subject)}/versions", body)["id"])

    def soft_delete(self, subject: str, version: int) -> None:
        """Soft-delete one version (Confluent's DELETE without `permanent`): its ID still resolves."""
        self._call("DELETE", f"/subjects/{self._quote(subject)}/versions/{version}")

    def soft_delete_subject(self, subject: str) -> list[int]:
        """Soft-delete every version of `subject`; the versions deleted."""
        return [int(v) for v in self._call("DELETE", f"/subjects/{self._quote(subject)}")]

    def set_mode(self, subject: str, mode: str) -> str:
        """Set the subject's mode (READWRITE, READONLY, IMPORT); the mode the registry answers."""
        return self._call("PUT", f"/mode/{self._quote(subject)}", {"mode": mode})["mode"]

    def set_compatibility(self, subject: str, level: str) -> None:
        self._call("PUT", f"/config/{self._quote(subject)}", {"compatibility": level})
