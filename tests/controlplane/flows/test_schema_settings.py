"""A cluster's schema registry and a flow's schema sync through the REST API: the registry URL is a
`schema.registry.*` client property of the cluster and its credentials are cluster secrets (encrypted,
write-only, masked, exported as placeholders), as SASL credentials are; the flow's mode and subjects are
flow properties, validated by the engine's rules and carried to the engine's config and the MM2 export."""

from __future__ import annotations

from controlplane.flows import engine
from controlplane.flows.models import Cluster, Flow
from replication.config import SchemaIdMode
from replication.schemas.flow import registry_client

USER_INFO = "registry-user:registry-pass-3141"
TOKEN = "registry-token-2718"


def test_a_cluster_registry_and_a_flow_schema_sync_set_through_the_api(admin_client):
    created = [
        admin_client.post(
            "/api/v1/clusters/",
            {
                "alias": alias,
                "bootstrap_servers": f"{alias.lower()}.example:9092",
                "client_properties": {
                    "client": {"schema.registry.url": f"http://registry-{alias}.example:8081"}
                },
                "secret_properties": {"client": {secret_name: secret}},
            },
            format="json",
        )
        for alias, secret_name, secret in (
            ("A", "schema.registry.basic.auth.user.info", USER_INFO),
            ("B", "schema.registry.bearer.auth.token", TOKEN),
        )
    ]
    assert [response.status_code for response in created] == [201, 201], created[0].content
    assert created[0].json()["secrets_set"] == ["client.schema.registry.basic.auth.user.info"]
    flow = admin_client.post(
        "/api/v1/flows/",
        {
            "source": "A",
            "target": "B",
            "schemas_sync_mode": "rewrite-ids",
            "schemas_subjects_exclude": ["internal-.*"],
        },
        format="json",
    )
    assert flow.status_code == 201, flow.content
    for field, value in (("schemas_sync_mode", "keep-all"), ("schemas_subjects", ["[unclosed"])):
        refused = admin_client.post(
            "/api/v1/flows/", {"source": "B", "target": "A", field: value}, format="json"
        )
        assert refused.status_code == 400 and field in refused.json(), refused.content

    source = engine.cluster_to_config(Cluster.objects.get(alias="A"))
    target = engine.cluster_to_config(Cluster.objects.get(alias="B"))
    assert source.schema_registry() == {
        "url": "http://registry-A.example:8081",
        "basic.auth.user.info": USER_INFO,
    }
    assert "schema.registry.url" not in source.client_properties("producer")  # not a Kafka client property
    assert registry_client(source).auth.header().startswith("Basic ")
    assert registry_client(target).auth.header() == f"Bearer {TOKEN}"
    config = engine.flow_to_config(Flow.objects.get())
    assert config.schemas_sync_mode == SchemaIdMode.REWRITE_IDS and config.schemas_subjects_exclude == (
        "internal-.*",
    )

    export = admin_client.get("/api/v1/mm2/export/").content.decode()
    shown = [
        admin_client.get("/api/v1/clusters/").content.decode(),
        admin_client.get("/api/v1/audit/").content.decode(),
        export,
    ]
    assert all(USER_INFO not in text and TOKEN not in text for text in shown)
    assert "A.schema.registry.url" in export and "registry-A.example" in export
    assert "A_SCHEMA_REGISTRY_BASIC_AUTH_USER_INFO" in export
    assert "A->B.schemas.sync.mode = rewrite-ids" in export
