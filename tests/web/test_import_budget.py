"""Issue 35 item 4: the Strimzi import reads YAML under a budget. Before, through gunicorn: a 550-byte
resource of nine-wide aliases six levels deep used 849 MB and got its worker killed after 32 s; a
recursive anchor, 5,000-deep nesting and a `!!python/name` tag each answered 500; a 995 KB resource
answered 500 after 30 s. Now each is a 400 naming the YAML problem and its fix, nothing is stored, and the
same web worker answers the next request."""

from __future__ import annotations

import pytest
import requests

from controlplane.core.models import AuditEvent
from controlplane.flows.models import Cluster
from tests.web.served import api

HEAD = "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nmetadata:\n  name: bomb\n"
LAUGHS = "  a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  {chr(98 + level)}: &{chr(98 + level)} [{', '.join([f'*{chr(97 + level)}'] * 9)}]\n"
    for level in range(6)
)
CLUSTERS = """\
  connectCluster: b
  clusters:
  - alias: a
    bootstrapServers: a.invalid:9092
  - alias: b
    bootstrapServers: b.invalid:9092
"""

BOMBS = {
    "billion laughs": (HEAD + "spec:\n" + LAUGHS, "once its aliases are expanded"),
    "recursive anchor": (HEAD + "spec: &spec\n  self: *spec\n", "refers to its own anchor"),
    "5,000-deep nesting": (HEAD + "spec: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64"),
    "python tag": (HEAD + "spec: !!python/name:os.system\n", "!!python/name:os.system is not one of"),
    "python object tag": (
        HEAD + 'spec: !!python/object/apply:os.system ["true"]\n',
        "is not one of YAML's core schema",
    ),
    "a core tag on a wrong value": (HEAD + "spec:\n  replicas: !!int many\n" + CLUSTERS, "cannot be read"),
    "995 KB": (
        HEAD + "spec:\n" + CLUSTERS + "".join(f"    x{n}: {'v' * 40}\n" for n in range(18_000)),
        "bytes, over the 524,288 read",
    ),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_hostile_resource_is_a_400_naming_the_yaml_problem(web, admin, bomb):
    text, expected = BOMBS[bomb]
    _, token = admin
    clusters_before = Cluster.objects.count()
    answer = api(web, token).post(f"{web.url}/api/v1/mm2/import/", json={"text": text}, timeout=60)
    assert answer.status_code == 400, answer.text[:500]
    errors = answer.json()["text"]
    assert any("YAML" in error and expected in error for error in errors), errors
    assert Cluster.objects.count() == clusters_before
    refusal = AuditEvent.objects.filter(action="import").latest("at")
    assert refusal.outcome == "refused" and expected in refusal.detail, refusal.detail
    # The worker that read it is the one that answers next (gunicorn runs one): it was not killed.
    assert requests.get(f"{web.url}/healthz", timeout=10).status_code == 200


def test_an_ordinary_resource_with_an_anchor_still_imports(web, admin):
    """Anchors and aliases within the budget are YAML, and some operators use them."""
    _, token = admin
    text = (
        HEAD
        + "spec:\n"
        + CLUSTERS
        + (
            "  mirrors:\n"
            "  - sourceCluster: a\n"
            "    targetCluster: b\n"
            "    sourceConnector: &connector\n"
            "      config: {replication.factor: 1}\n"
            "    checkpointConnector: *connector\n"
            "    topicsPattern: orders.*\n"
        )
    )
    answer = api(web, token).post(
        f"{web.url}/api/v1/mm2/import/", json={"text": text, "dry_run": True}, timeout=60
    )
    assert answer.status_code == 200, answer.text[:500]
