"""docker-compose.yml cannot run here (no Docker engine): check it parses and matches the code."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from controlplane import settings_runtime

ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = ("web", "worker", "worker-metadata", "beat")
REQUIRED_ENV = ("DATABASE_URL", "REDIS_URL", "METRICS_DIR", "SECRET_KEY", "MIRRORPLANE_SECRETS_KEY")


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _variables_read_by_settings() -> set[str]:
    """Environment variables the settings modules read (`env.str("NAME", ...)`, `env.db("NAME")`, ...)."""
    names: set[str] = set()
    for module in ("settings.py", "settings_runtime.py", "settings_security.py"):
        text = (ROOT / "controlplane" / module).read_text()
        names.update(re.findall(r"env\.\w+\(\s*\"([A-Z][A-Z0-9_]*)\"", text))
    return names


def test_services_of_the_production_shape():
    services = _compose()["services"]
    assert {"postgres", "redis", "kafka-dc1", "kafka-dc2", *APP_SERVICES} <= set(services)
    for kafka in ("kafka-dc1", "kafka-dc2"):
        assert services[kafka]["image"].startswith("apache/kafka:")
        assert services[kafka]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft
    assert "gunicorn controlplane.wsgi" in services["web"]["command"]
    assert services["beat"]["command"].startswith("celery -A workers.app beat")


def test_app_environment_matches_the_settings():
    known = _variables_read_by_settings()
    assert set(REQUIRED_ENV) <= known, "the settings no longer read a variable the compose file sets"
    for name in APP_SERVICES:
        environment = _compose()["services"][name]["environment"]
        assert set(REQUIRED_ENV) <= set(environment), name
        unknown = set(environment) - known
        assert not unknown, f"{name} sets variables no setting reads: {sorted(unknown)}"


def test_workers_consume_every_queue_the_tasks_are_routed_to():
    services = _compose()["services"]
    consumed = set()
    for name in ("worker", "worker-metadata"):
        command = services[name]["command"]
        assert command.startswith("celery -A workers.app worker")
        consumed.update(re.search(r"-Q (\S+)", command).group(1).split(","))
    routed = {route["queue"] for route in settings_runtime.CELERY_TASK_ROUTES.values()}
    assert routed | {settings_runtime.CELERY_TASK_DEFAULT_QUEUE} <= consumed


def _procfile() -> dict[str, str]:
    lines = (ROOT / "Procfile.demo").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line and not line.startswith("#"))


def test_the_demo_runs_workers_and_beat_under_a_restarter_with_metadata_apart():
    processes = _procfile()
    celery = {name: command for name, command in processes.items() if "celery -A workers.app" in command}
    assert set(celery) == {"worker", "metadata", "beat"}
    for name, command in celery.items():
        assert command.startswith(".venv/bin/python -m workers.respawn "), name
    queues = {
        name: re.search(r"-Q (\S+)", command).group(1) for name, command in celery.items() if name != "beat"
    }
    assert queues == {"worker": "replication", "metadata": "metadata,reports,operations"}
    for name in queues:
        assert "--pool=threads" in celery[name]


def test_compose_restarts_every_application_process():
    services = _compose()["services"]
    for name in APP_SERVICES:
        assert services[name]["restart"] == "unless-stopped", name


def test_systemd_units_run_the_compose_commands_and_restart_always():
    """deploy/systemd: the same worker and beat commands as the compose file, restarted whatever the exit."""
    import configparser

    services = _compose()["services"]
    units = {"worker": "mirrorplane-worker", "worker-metadata": "mirrorplane-worker-metadata"}
    for service, unit in units.items():
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(ROOT / "deploy" / "systemd" / f"{unit}.service")
        command = parser["Service"]["ExecStart"]
        assert command.split("/.venv/bin/", 1)[1] == services[service]["command"], unit
        assert parser["Service"]["Restart"] == "always"
        assert parser["Service"]["KillSignal"] == "SIGTERM"  # Celery's warm shutdown


def _bind_mounts(service: dict) -> dict[str, Path]:
    """Container path -> repository path of the service's `./...` bind mounts (which must exist)."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            path = ROOT / source
            assert path.exists(), f"{volume}: {source} is not in the repository"
            mounts[target] = path
    return mounts


def _in_container(mounts: dict[str, Path], container_path: str) -> Path:
    """The repository file a container path comes from."""
    for target, source in mounts.items():
        if container_path.startswith(target + "/"):
            return source / container_path.removeprefix(target + "/")
    raise AssertionError(f"{container_path} is not mounted from the repository")


def test_prometheus_scrapes_the_web_with_the_token_the_web_requires():
    compose = _compose()
    services = compose["services"]
    prometheus = services["prometheus"]
    mounts = _bind_mounts(prometheus)
    config_flag = next(arg for arg in prometheus["command"] if arg.startswith("--config.file="))
    config_path = _in_container(mounts, config_flag.split("=", 1)[1])
    assert config_path == ROOT / "deploy" / "prometheus" / "prometheus.yml"
    config = yaml.safe_load(config_path.read_text())
    for rule_file in config["rule_files"]:
        assert (config_path.parent / rule_file).is_file(), rule_file
    job = next(job for job in config["scrape_configs"] if job["job_name"] == "mirrorplane")
    web_port = re.search(r"--bind 0\.0\.0\.0:(\d+)", services["web"]["command"]).group(1)
    assert job["static_configs"][0]["targets"] == [f"web:{web_port}"]
    # The token: a compose secret from METRICS_BEARER_TOKEN, which the web requires too.
    (secret,) = prometheus["secrets"]
    assert compose["secrets"][secret] == {"environment": "METRICS_BEARER_TOKEN"}
    assert job["authorization"]["credentials_file"] == f"/run/secrets/{secret}"
    assert services["web"]["environment"]["METRICS_BEARER_TOKEN"].startswith("${METRICS_BEARER_TOKEN:?")
    (alertmanagers,) = config["alerting"]["alertmanagers"]
    assert alertmanagers["static_configs"][0]["targets"] == ["alertmanager:9093"]
    assert "9093:9093" in services["alertmanager"]["ports"]


def test_alertmanager_and_grafana_read_the_deploy_files():
    services = _compose()["services"]
    alertmanager = services["alertmanager"]
    config_flag = next(arg for arg in alertmanager["command"] if arg.startswith("--config.file="))
    config_path = _in_container(_bind_mounts(alertmanager), config_flag.split("=", 1)[1])
    assert config_path == ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
    grafana = services["grafana"]
    mounts = _bind_mounts(grafana)
    assert mounts["/etc/grafana/provisioning"] == ROOT / "deploy" / "grafana" / "provisioning"
    provider = yaml.safe_load((ROOT / "deploy/grafana/provisioning/dashboards/mirrorplane.yml").read_text())
    dashboards = _in_container(mounts, provider["providers"][0]["options"]["path"] + "/mirrorplane.json")
    assert dashboards == ROOT / "deploy" / "grafana" / "dashboards" / "mirrorplane.json"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert _in_container(mounts, home) == dashboards
    datasources = yaml.safe_load(
        (ROOT / "deploy/grafana/provisioning/datasources/mirrorplane.yml").read_text()
    )
    assert datasources["datasources"][0]["url"] == "http://prometheus:9090"
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    for name in ("prometheus", "alertmanager", "grafana"):
        assert services[name]["restart"] == "unless-stopped", name
