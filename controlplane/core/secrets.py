"""Rotating the secrets key: re-encrypt every stored secret with a new key; the key itself is never logged or
audited.

Every stored secret is a column a model names in its `SECRET_COLUMNS` (clusters' secrets, notification
channels' URLs): the rotation finds them through Django's app registry, so the core imports none of the
packages that own those tables.
"""

from __future__ import annotations

from django.apps import apps
from django.conf import settings as django_settings
from django.db import models

from controlplane.core import crypto
from controlplane.core.audit import audit_record, audited_attempt
from controlplane.core.models import AuditAction


def secret_columns() -> list[tuple[type[models.Model], str]]:
    """Every (model, column) holding a secret encrypted with `controlplane.core.crypto`."""
    return [
        (model, column)
        for model in apps.get_app_config("controlplane").get_models()
        for column in getattr(model, "SECRET_COLUMNS", ())
    ]


# -- secrets key rotation ---------------------------------------------------------------------------------
def secrets_key_rotate(*, actor, new_key: str | None = None) -> dict[str, int]:
    """Re-encrypt every stored secret with `new_key` (or with the first configured key when None).

    Decryption accepts every configured key plus `new_key`, so a rotation interrupted and run again
    finishes. Returns the rows re-encrypted by table (`{"clusters": 1, "notification channels": 0}`).
    The key itself is never logged or audited.
    """
    configured = list(django_settings.MIRRORPLANE_SECRETS_KEYS)
    new = crypto.fernet_for([new_key] if new_key else configured)
    old = crypto.fernet_for([new_key, *configured] if new_key else configured)
    with audited_attempt(actor=actor, action=AuditAction.ROTATE_SECRETS_KEY, object_type="secrets"):
        counts: dict[str, int] = {}
        for model, column in secret_columns():
            rows = 0
            for row in model.objects.select_for_update().exclude(**{column: ""}):
                setattr(row, column, crypto.reencrypt(getattr(row, column), old=old, new=new))
                row.save(update_fields=[column])
                rows += 1
            name = str(model._meta.verbose_name_plural)
            counts[name] = counts.get(name, 0) + rows
        audit_record(
            actor=actor,
            action=AuditAction.ROTATE_SECRETS_KEY,
            object_type="secrets",
            detail=f"re-encrypted the secrets of {rotated_text(counts)} with "
            f"{'a new' if new_key else 'the primary'} key",
        )
    return counts


def rotated_text(counts: dict[str, int]) -> str:
    """`{"clusters": 1, "notification channels": 0}` -> "1 cluster(s), 0 notification channel(s)"."""
    return ", ".join(f"{rows} {name.removesuffix('s')}(s)" for name, rows in counts.items())
