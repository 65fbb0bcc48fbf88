"""The Prometheus, Alertmanager and Grafana files shipped in deploy/ for operators who run their own stack.

`promtool` and `amtool` are Debian's (`make test` installs them: targets `prometheus` and `alertmanager`);
a missing tool fails these tests, never skips them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.promql import BUILTIN, ROOT, documented_names, exported_names, metric_names

DEPLOY = ROOT / "deploy"
RULES = DEPLOY / "prometheus" / "mirrorplane-rules.yml"
RULE_TESTS = DEPLOY / "prometheus" / "mirrorplane-rules.test.yml"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
ALERTMANAGER_CONFIG = DEPLOY / "alertmanager" / "alertmanager.yml"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "mirrorplane.json"
RUNBOOK = ROOT / "docs" / "alert-runbook.md"

# Alerts about one flow (labels flow, source, target) and about the runtime.
FLOW_ALERTS = {
    "MirrorplaneRpoSecondsExceeded", "MirrorplaneRpoRecordsExceeded", "MirrorplaneFlowFaulted",
    "MirrorplaneFlowStale", "MirrorplaneHeartbeatMissing", "MirrorplaneDataLossGap",
    "MirrorplaneTasksWithoutLease", "MirrorplaneOffsetSyncsStopped", "MirrorplaneVerificationMismatch",
    "MirrorplaneFailoverReadinessLow", "MirrorplanePoolWithoutWorker", "MirrorplaneSchemaSyncFailing",
}  # fmt: skip
RUNTIME_ALERTS = {
    "MirrorplaneNoReplicationWorker", "MirrorplaneSupervisorMissing", "MirrorplaneDown", "MirrorplaneRedisDown",
    "MirrorplaneRulesNotEvaluated",
}  # fmt: skip


def _tool(name: str, target: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: run `make {target}` (Debian's package; `make test` installs it)"
    return path


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def _rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def _alerts() -> list[dict]:
    return [rule for rule in _rules() if "alert" in rule]


def _recorded() -> set[str]:
    return {rule["record"] for rule in _rules() if "record" in rule}


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    # Grafana's `label_values(<series selector>, <label>)`: the selector is PromQL.
    variables = [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    exprs += [re.fullmatch(r"label_values\((.+),\s*\w+\)", query).group(1) for query in variables]
    return exprs


def _annotation_queries(rule: dict) -> list[str]:
    """PromQL run by the annotation templates (`printf "expr{flow=%q}" $labels.flow | query`)."""
    text = " ".join(rule.get("annotations", {}).values())
    return [query.replace("%q", '"x"') for query in re.findall(r'printf "((?:[^"\\]|\\.)*)"', text)]


def test_promtool_checks_the_rules():
    output = _run(_tool("promtool", "prometheus"), "check", "rules", RULES)
    assert f"SUCCESS: {len(_rules())} rules found" in output


def test_promtool_unit_tests_of_every_alert_pass():
    output = _run(_tool("promtool", "prometheus"), "test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert "SUCCESS" in output


def test_every_alert_has_unit_tests_firing_and_not_firing():
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    cases = [case for test in tests for case in test.get("alert_rule_test", [])]
    for alert in _alerts():
        name = alert["alert"]
        assert any(c["alertname"] == name and c["exp_alerts"] for c in cases), f"{name} never fires in a test"
        assert any(c["alertname"] == name and not c["exp_alerts"] for c in cases), f"{name}: no quiet case"


def test_the_shipped_alerts():
    assert {alert["alert"] for alert in _alerts()} == FLOW_ALERTS | RUNTIME_ALERTS


def test_every_rule_mirrorplane_evaluates_itself_ships_as_a_prometheus_alert():
    """A new embedded rule (controlplane.alerts.models.AlertRule) fails this until deploy/ ships its alert."""
    from controlplane.alerts.models import AlertRule

    embedded = {
        AlertRule.RPO_SECONDS: "MirrorplaneRpoSecondsExceeded",
        AlertRule.RPO_RECORDS: "MirrorplaneRpoRecordsExceeded",
        AlertRule.STALE_STATUS: "MirrorplaneFlowStale",
        AlertRule.HEARTBEAT_MISSING: "MirrorplaneHeartbeatMissing",
        AlertRule.DATA_LOSS_GAP: "MirrorplaneDataLossGap",
        AlertRule.FLOW_FAULTED: "MirrorplaneFlowFaulted",
        AlertRule.NO_LEASE_HOLDER: "MirrorplaneTasksWithoutLease",
        AlertRule.OFFSET_SYNCS_STOPPED: "MirrorplaneOffsetSyncsStopped",
        AlertRule.VERIFICATION_MISMATCH: "MirrorplaneVerificationMismatch",
        AlertRule.READINESS_LOW: "MirrorplaneFailoverReadinessLow",
        AlertRule.POOL_WITHOUT_WORKERS: "MirrorplanePoolWithoutWorker",
    }
    assert set(embedded) == set(AlertRule.values)
    assert set(embedded.values()) <= FLOW_ALERTS
    runbook = RUNBOOK.read_text()
    for rule, alert in embedded.items():
        assert re.search(rf"^\| {alert} \|.*`{rule}`", runbook, flags=re.MULTILINE), (alert, rule)


def test_alerts_carry_severity_summary_description_and_a_runbook_section_that_exists():
    runbook = RUNBOOK.read_text()
    anchors = {_anchor(heading) for heading in re.findall(r"^#+ (.+)$", runbook, flags=re.MULTILINE)}
    for alert in _alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in {"critical", "warning"}, name
        annotations = alert["annotations"]
        assert annotations["summary"] and annotations["description"], name
        path, anchor = annotations["runbook_url"].split("#")
        assert path == "docs/alert-runbook.md" and anchor in anchors, (name, anchor)
        if name in FLOW_ALERTS:
            assert "$labels.flow" in annotations["summary"], f"{name}: the summary must name the flow"
            assert "$labels.flow" in annotations["description"], name


def _anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_flow_alerts_are_quiet_for_flows_that_should_not_replicate():
    """Every per-flow figure alert is joined with should_replicate (paused, disabled, failed over: quiet).

    A faulted flow's own alert, a data-loss gap (which only a replicating flow can find) and a copy that
    differs from the source (wrong data whatever the state) need no join.
    """
    unjoined = {"MirrorplaneFlowFaulted", "MirrorplaneDataLossGap", "MirrorplaneVerificationMismatch"}
    for alert in _alerts():
        if alert["alert"] in FLOW_ALERTS - unjoined:
            assert "and on (flow, source, target) mirrorplane_flow:should_replicate" in alert["expr"], alert


def test_rules_and_dashboard_read_only_metrics_mirrorplane_exports():
    """A renamed metric breaks this test until the rules and the dashboard follow."""
    known = documented_names() | exported_names() | _recorded() | BUILTIN
    used: dict[str, set[str]] = {}
    for rule in _rules():
        for expr in [rule["expr"], *_annotation_queries(rule)]:
            used.setdefault(rule.get("alert") or rule["record"], set()).update(metric_names(expr))
    for expr in _dashboard_exprs():
        used.setdefault("dashboard", set()).update(metric_names(expr))
    unknown = {where: sorted(names - known) for where, names in used.items() if names - known}
    assert not unknown, f"not in docs/metrics.md nor controlplane/metrics/prometheus.py: {unknown}"
    assert {"mirrorplane_flow_seconds_behind", "mirrorplane_records_replicated_total"} <= used["dashboard"]


def test_the_name_check_catches_a_rename():
    assert metric_names('rate(mirrorplane_records_replicated_total{flow=~"$flow"}[1m])') == {
        "mirrorplane_records_replicated_total"
    }
    assert "mirrorplane_records_replicated_total" in exported_names() | documented_names()
    assert "mirrorplane_records_copied_total" not in exported_names() | documented_names()


def test_the_dashboard_has_a_flow_variable_and_the_figures_operators_need():
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["flow"]["multi"] and variables["flow"]["includeAll"]
    exprs = " ".join(_dashboard_exprs())
    for figure in (
        "mirrorplane_flow_records_behind", "mirrorplane_flow_seconds_behind", "mirrorplane_rpo_budget_seconds",
        "rate(mirrorplane_records_replicated_total", "rate(mirrorplane_bytes_replicated_total",
        "mirrorplane_record_age_seconds", "mirrorplane_replication_latency_seconds",
        "mirrorplane_partition_state", "mirrorplane_flow_state", "mirrorplane_data_loss_gaps_total",
        "mirrorplane_operations_total", "mirrorplane_worker_up",
    ):  # fmt: skip
        assert figure in exprs, figure
    flow_panels = [
        t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "flow" in t["expr"]
    ]
    assert all('flow=~"$flow"' in expr for expr in flow_panels), "a per-flow panel ignores the flow variable"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_the_dashboard_panels_do_not_overlap():
    taken: dict[tuple[int, int], str] = {}
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[x, y]}"
                taken[x, y] = panel["title"]


def test_promtool_accepts_the_prometheus_config_with_its_rules(tmp_path):
    """The shipped config as compose mounts it: the token file is the compose secret."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    job = next(job for job in config["scrape_configs"] if job["job_name"] == "mirrorplane")
    assert job["authorization"]["credentials_file"] == "/run/secrets/metrics_bearer_token"
    assert config["rule_files"] == [RULES.name]
    token = tmp_path / "token"
    token.write_text("scrape-token")
    job["authorization"]["credentials_file"] = str(token)
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    shutil.copy(RULES, tmp_path / RULES.name)
    output = _run(_tool("promtool", "prometheus"), "check", "config", tmp_path / "prometheus.yml")
    assert f"SUCCESS: {len(_rules())} rules found" in output


def test_amtool_accepts_the_alertmanager_config():
    output = _run(_tool("amtool", "alertmanager"), "check-config", ALERTMANAGER_CONFIG)
    assert "SUCCESS" in output


@pytest.mark.parametrize("name", ["datasources/mirrorplane.yml", "dashboards/mirrorplane.yml"])
def test_grafana_provisioning_parses(name):
    provisioning = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / name).read_text())
    assert provisioning["apiVersion"] == 1
