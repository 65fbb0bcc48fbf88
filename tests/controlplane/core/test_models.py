"""Each domain owns its tables: every model of the one app `controlplane` is defined in its package's
`models` module, the migrations describe exactly these models, and every encrypted column is rotated."""

from __future__ import annotations

import tomllib
from pathlib import Path

from django.apps import apps
from django.db.migrations.autodetector import MigrationAutodetector
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState

from controlplane.core.secrets import secret_columns

ROOT = Path(__file__).resolve().parents[3]


def layered_packages() -> set[str]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [layers] = [contract for contract in contracts if contract["type"] == "layers"]
    return {package.strip() for layer in layers["layers"] for package in layer.split("|")}


def test_every_model_lives_in_a_layered_package():
    modules = {model.__name__: model.__module__ for model in apps.get_app_config("controlplane").get_models()}
    homes = {f"controlplane.{package}.models" for package in layered_packages()}
    assert len(modules) == 23
    misplaced = {name: module for name, module in modules.items() if module not in homes}
    assert misplaced == {}
    owners = {module.split(".")[1] for module in modules.values()}
    assert owners == {"core", "flows", "status", "reports", "assurance", "operations", "alerts"}


def test_the_migrations_describe_the_models():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    changes = MigrationAutodetector(loader.project_state(), ProjectState.from_apps(apps)).changes(
        graph=loader.graph
    )
    assert changes == {}


def test_every_encrypted_column_is_rotated():
    encrypted = {
        (model.__name__, field.name)
        for model in apps.get_app_config("controlplane").get_models()
        for field in model._meta.get_fields()
        if field.name.endswith("_encrypted")
    }
    rotated = {(model.__name__, column) for model, column in secret_columns()}
    assert (
        rotated == encrypted == {("Cluster", "secrets_encrypted"), ("NotificationChannel", "url_encrypted")}
    )
