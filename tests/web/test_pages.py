"""Forms and pages through the real views: secrets stay write-only, engine errors land on their field,
MM2 import dry-runs before it applies, the audit log filters."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from controlplane import assurance
from controlplane.core.models import AuditEvent
from controlplane.flows import engine, services
from controlplane.flows.models import Cluster, Flow
from controlplane.status import rollup
from controlplane.web import summaries
from tests.strimzi_resource import RESOURCE, SECRETS

pytestmark = pytest.mark.django_db

CLUSTER_FORM = {"alias": "dc1", "bootstrap_servers": "dc1.invalid:9092", "security_protocol": "SASL_SSL"}


def test_cluster_secrets_are_write_only(client_as):
    admin = client_as("admin")
    response = admin.post(
        reverse("web:cluster-create"),
        CLUSTER_FORM | {"sasl_mechanism": "PLAIN", "sasl_username": "mirror", "sasl_password": "s3cret-pw"},
    )
    assert response.status_code == 302, response.content.decode()
    cluster = Cluster.objects.get(alias="dc1")
    edit = admin.get(reverse("web:cluster-edit", args=[cluster.pk])).content.decode()
    assert "s3cret-pw" not in edit and 'value="mirror"' not in edit
    assert "leave blank to keep" in edit

    # Blank keeps the stored secret; ticking "remove" removes one.
    admin.post(
        reverse("web:cluster-edit", args=[cluster.pk]),
        CLUSTER_FORM | {"sasl_mechanism": "PLAIN", "remove_secrets": ["client.sasl.username"]},
    )
    cluster.refresh_from_db()
    assert engine.cluster_secrets(cluster)["client"] == {"sasl.password": "s3cret-pw"}
    assert "s3cret-pw" not in str(list(AuditEvent.objects.values("before", "after", "detail")))


def test_cluster_errors_from_the_service_land_on_their_field(client_as):
    response = client_as("admin").post(
        reverse("web:cluster-create"), CLUSTER_FORM | {"alias": "dc.1", "bootstrap_servers": "nohost"}
    )
    errors = response.context["form"].errors
    assert "is not a valid cluster alias" in errors["alias"][0]
    assert "is not host:port" in errors["bootstrap_servers"][0]
    assert not Cluster.objects.exists()


def _flow_form(source: Cluster, target: Cluster, **changes) -> dict:
    fields = engine.flow_settings(Flow()) | {"enabled": True}
    data = {
        name: ", ".join(value) if isinstance(value, list) else value
        for name, value in fields.items()
        if name != "extra" and value is not False
    }
    return data | {"source": source.pk, "target": target.pk} | changes


def test_flow_create_and_an_invalid_pattern_flagged_with_the_engines_reason(client_as, flow):
    admin = client_as("admin")
    c = services.cluster_create(actor=None, alias="C", bootstrap_servers="c.invalid:9092")

    bad = admin.post(reverse("web:flow-create"), _flow_form(flow.source, c, topics="orders(, [x"))
    assert "is not a valid regular expression" in bad.context["form"].errors["topics"][0]
    assert "Fix:" in bad.context["form"].errors["topics"][0]

    good = admin.post(
        reverse("web:flow-create"),
        _flow_form(flow.source, c, topics="orders.*", topics_exclude="tmp.*", extra="producer.linger.ms=20"),
    )
    created = Flow.objects.get(source=flow.source, target=c)
    assert good["Location"] == reverse("web:flow", args=[created.pk])
    assert created.topics == ["orders.*"] and created.extra == {"producer.linger.ms": "20"}


def test_a_flow_closing_a_replication_loop_is_refused_with_the_loop(client_as, flow):
    response = client_as("admin").post(
        reverse("web:flow-create"),
        _flow_form(flow.target, flow.source, replication_policy_class="IdentityReplicationPolicy"),
    )
    assert "replication loop" in " ".join(response.context["form"].non_field_errors())


def test_preview_flags_an_invalid_pattern_inline_without_asking_the_cluster(client_as, flow):
    response = client_as("admin").post(
        reverse("web:flow-preview"), _flow_form(flow.source, flow.target, topics_exclude="a{2,1}")
    )
    html = response.content.decode()
    assert 'id="error-topics_exclude" class="field-error" hx-swap-oob="true"' in html
    assert "is not a valid regular expression" in html
    assert "Fix the patterns flagged above" in html


MM2 = """clusters = X, Y
X.bootstrap.servers = x.invalid:9092
Y.bootstrap.servers = y.invalid:9092
X->Y.enabled = true
X->Y.topics = orders.*
"""


def test_mm2_import_dry_run_changes_nothing_then_apply_creates(client_as):
    admin = client_as("admin")
    dry = admin.post(reverse("web:mm2-import"), {"text": MM2, "dry_run": "1"})
    assert [c.change for c in dry.context["result"].changes] == ["create", "create", "create"]
    assert b"Apply these changes" in dry.content and not Cluster.objects.exists()

    applied = admin.post(reverse("web:mm2-import"), {"text": MM2, "apply": "1"})
    assert applied.context["result"].applied
    assert Flow.objects.filter(source__alias="X", target__alias="Y", topics=["orders.*"]).exists()

    export = admin.get(reverse("web:mm2-export"))
    assert export["Content-Disposition"] == 'attachment; filename="mm2.properties"'
    assert b"X->Y.topics = orders.*" in export.content


def test_mm2_import_errors_name_the_line_and_the_fix(client_as):
    response = client_as("admin").post(
        reverse("web:mm2-import"), {"text": "clusters = X\nX.bootstrap.servers = x:1\nX->Z.enabled = true\n"}
    )
    assert response.context["import_errors"][0]["line"] == 3
    assert b"The file was not imported" in response.content


def test_strimzi_resource_import_asks_for_its_secrets_then_exports_as_kafkamirrormaker2(
    client_as, monkeypatch
):
    for name in SECRETS:
        monkeypatch.delenv(name, raising=False)
    admin = client_as("admin")
    asked = admin.post(reverse("web:mm2-import"), {"text": RESOURCE, "dry_run": "1"})
    assert asked.context["unfilled"] == list(SECRETS)  # each Secret's value, by the variable named after it
    typed = {f"env_{name}": value for name, value in SECRETS.items()}
    dry = admin.post(reverse("web:mm2-import"), {"text": RESOURCE, "dry_run": "1", **typed})
    assert [c.change for c in dry.context["result"].changes] == ["create", "create", "create"]
    assert not Cluster.objects.exists()
    broken = admin.post(
        reverse("web:mm2-import"), {"text": RESOURCE.replace("tasksMax: 4", "tasksMax: 0"), **typed}
    )
    assert b"(<code>spec.mirrors[0].sourceConnector.tasksMax</code>)" in broken.content

    admin.post(reverse("web:mm2-import"), {"text": RESOURCE, "apply": "1", **typed})
    export = admin.get(reverse("web:mm2-export"), {"format": "strimzi"})
    assert export["Content-Disposition"] == 'attachment; filename="kafkamirrormaker2.yaml"'
    assert b"sourceCluster: cluster-a" in export.content and b"mm2-user" in export.content
    assert all(value.encode() not in export.content for value in SECRETS.values())


def test_audit_log_filters_by_action(client_as, flow):
    services.flow_pause(actor=None, flow=flow)
    page = client_as("viewer").get(reverse("web:audit"), {"action": "pause"})
    assert [event.action for event in page.context["page"].object_list] == ["pause"]
    assert "UTC" in page.content.decode()


def test_opposite_flows_are_drawn_as_two_separate_arrows(flow):
    back = services.flow_create(actor=None, source=flow.target, target=flow.source)
    rows = [
        rollup.summarize(f, [], now=timezone.now(), stale_after=10.0, budget=assurance.DEFAULT_BUDGET)
        for f in (flow, back)
    ]
    picture = summaries.topology(clusters=[flow.source, flow.target], summaries=rows)

    there, back_edge = picture.edges
    assert there.x1 < there.x2 and back_edge.x1 > back_edge.x2
    assert abs(there.y1 - back_edge.y1) >= summaries.PAIR_OFFSET


def test_after_a_failover_the_page_lists_the_clients_to_switch_and_no_readiness_score(flow, client_as):
    """The groups the failover moved, what each reads on the target (the remote names with the offsets,
    the local names producers write to now), the target's bootstrap servers; the readiness is n/a."""
    from controlplane.operations.models import Operation, OperationGroupResult

    failover = Operation.objects.create(
        kind="failover",
        flow=flow,
        phase="done",
        outcome="succeeded",
        active=False,
        groups=["billing"],
        drain_timeout_s=60,
    )
    OperationGroupResult.objects.create(
        operation=failover, group="billing", outcome="written", topics=["orders"],
        written={f"{flow.source.alias}.orders[0]": 5, f"{flow.source.alias}.orders[1]": 7},
    )  # fmt: skip
    OperationGroupResult.objects.create(
        operation=failover, group="refused-one", outcome="refused", topics=["x"]
    )
    Flow.objects.filter(pk=flow.pk).update(state="failed_over")
    page = client_as("operator").get(reverse("web:failover", args=[flow.pk])).content.decode()
    panel = page[page.index('id="switch-clients"') :]
    assert f"Switch these clients to {flow.target.alias}" in panel
    assert f"<code>{flow.target.bootstrap_servers}</code>" in panel
    assert (
        f"<code>billing</code></td><td><code>{flow.source.alias}.orders</code>, <code>orders</code>" in panel
    )
    assert "refused-one" not in panel  # a refused group did not move
    assert 'Failover readiness: <span class="badge">n/a</span>' in page


@pytest.mark.parametrize(
    "aliases", [("east", "west", "lab"), ("east", "west", "lab", "dr-site"), tuple("abcde"), tuple("abcdef")]
)
def test_topology_labels_are_placed_apart_inside_the_picture(aliases):
    """Every flow both ways between every pair: each label's estimated box (never smaller than drawn) is
    clear of every other label and cluster and inside the picture (Chromium checks the drawn boxes in
    tests/e2e/test_topology_and_phone.py)."""
    clusters = [
        services.cluster_create(actor=None, alias=a, bootstrap_servers=f"{a}.invalid:9092") for a in aliases
    ]
    flows = [
        services.flow_create(actor=None, source=s, target=t) for s in clusters for t in clusters if s != t
    ]
    rows = [
        rollup.summarize(f, [], now=timezone.now(), stale_after=10.0, budget=assurance.DEFAULT_BUDGET)
        for f in flows
    ]
    picture = summaries.topology(clusters=clusters, summaries=rows)
    boxes = []
    for edge in picture.edges:
        width, height = summaries.label_size(edge.lines)
        top = edge.label_y - 2 - summaries.LABEL_FONT_PX
        boxes.append((edge.label_x - width / 2, top, edge.label_x + width / 2, top + height))
    pad = picture.radius
    nodes = [(n.x - pad, n.y - pad, n.x + pad, n.y + pad) for n in picture.nodes]
    for i, box in enumerate(boxes):
        assert box[0] >= 0 and box[2] <= picture.width and box[1] >= 0 and box[3] <= picture.height, box
        clashes = [other for other in boxes[i + 1 :] + nodes if summaries.overlap_area(box, other)]
        if len(aliases) <= 5:  # 30 labels among 6 clusters: one may touch another; all stay inside
            assert not clashes, (picture.edges[i].lines, box, clashes)
