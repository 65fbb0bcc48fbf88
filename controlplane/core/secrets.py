"""Rotating the secrets key: re-encrypt every stored secret (clusters' secrets, notification channels'
URLs) with a new key; the key itself is never logged or audited.
"""

from __future__ import annotations

from django.conf import settings as django_settings

from controlplane.core import crypto
from controlplane.core.audit import audit_record, audited_attempt
from controlplane.models import (
    AuditAction,
    Cluster,
    NotificationChannel,
)


# -- secrets key rotation ---------------------------------------------------------------------------------
def secrets_key_rotate(*, actor, new_key: str | None = None) -> int:
    """Re-encrypt every stored secret with `new_key` (or with the first configured key when None).

    Decryption accepts every configured key plus `new_key`, so a rotation interrupted and run again
    finishes. Notification channels' URLs are re-encrypted too. Returns the number of clusters re-encrypted. The key itself is never logged or audited.
    """
    configured = list(django_settings.MIRRORPLANE_SECRETS_KEYS)
    new = crypto.fernet_for([new_key] if new_key else configured)
    old = crypto.fernet_for([new_key, *configured] if new_key else configured)
    with audited_attempt(actor=actor, action=AuditAction.ROTATE_SECRETS_KEY, object_type="secrets"):
        count = 0
        for cluster in Cluster.objects.select_for_update().exclude(secrets_encrypted=""):
            cluster.secrets_encrypted = crypto.reencrypt(cluster.secrets_encrypted, old=old, new=new)
            cluster.save(update_fields=["secrets_encrypted"])
            count += 1
        channels = 0  # alert notification channels' URLs (they may hold tokens)
        for channel in NotificationChannel.objects.select_for_update().exclude(url_encrypted=""):
            channel.url_encrypted = crypto.reencrypt(channel.url_encrypted, old=old, new=new)
            channel.save(update_fields=["url_encrypted"])
            channels += 1
        audit_record(
            actor=actor,
            action=AuditAction.ROTATE_SECRETS_KEY,
            object_type="secrets",
            detail=f"re-encrypted the secrets of {count} cluster(s) and {channels} notification channel(s) with "
            f"{'a new' if new_key else 'the primary'} key",
        )
    return count
