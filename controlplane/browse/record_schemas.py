"""The message browser reads records in the Confluent wire format with the cluster's schema registry
(`replication.schemas.decoding`): one registry client per page, each schema fetched once, reads bounded by
MIRRORPLANE_WEB_READ_TIMEOUT_S, and after the registry's first failure the rest of the page does not ask
again (every record says why it is shown as bytes). A cluster without a registry decodes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from controlplane.core.outbound import outbound_hosts
from controlplane.flows import engine
from controlplane.models import Cluster
from replication.schemas.decoding import Decoded, decode_record
from replication.schemas.flow import registry_client
from replication.schemas.rest import ConfluentRegistryClient, Schema

Decoder = Callable[[bytes | None], Decoded]


class PageRegistry:
    """A registry as one page reads it: answers kept, and its first failure repeated without asking."""

    def __init__(self, client: ConfluentRegistryClient) -> None:
        self.client = client
        self.answers: dict[tuple, Any] = {}
        self.failure: Exception | None = None

    def _ask(self, key: tuple, ask: Callable[[], Any]) -> Any:
        if self.failure is not None:
            raise self.failure
        if key not in self.answers:
            try:
                self.answers[key] = ask()
            except Exception as exc:
                self.failure = exc
                raise
        return self.answers[key]

    def schema_by_id(self, schema_id: int) -> Schema | None:
        return self._ask(("id", schema_id), lambda: self.client.schema_by_id(schema_id))

    def version(self, subject: str, version: int) -> Any:
        return self._ask(("version", subject, version), lambda: self.client.version(subject, version))


def record_decoder(cluster: Cluster) -> Decoder | None:
    """A decoder of this page's records with `cluster`'s registry; None when it has none."""
    config = engine.cluster_to_config(cluster)
    if not config.schema_registry().get("url"):
        return None
    client = registry_client(config, allowlist=outbound_hosts())
    client.timeout_s = settings.MIRRORPLANE_WEB_READ_TIMEOUT_S
    registry = PageRegistry(client)
    return lambda payload: decode_record(payload, registry)
