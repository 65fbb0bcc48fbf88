"""Secrets at rest: Fernet (AES-128-CBC + HMAC) with the keys in settings.MIRRORPLANE_SECRETS_KEYS.

The first key encrypts; every listed key decrypts, so a key rotation is: re-encrypt every stored secret
with a new key (`manage.py rotate_secrets_key`), then set MIRRORPLANE_SECRETS_KEY to the new key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretsKeyError(RuntimeError):
    """The stored secrets cannot be decrypted with the configured keys (wrong or rotated-away key)."""


def fernet_for(keys: Sequence[str]) -> MultiFernet:
    """Encrypts with the first key, decrypts with any."""
    try:
        return MultiFernet([Fernet(key.encode() if isinstance(key, str) else key) for key in keys])
    except ValueError as exc:
        raise SecretsKeyError(
            "MIRRORPLANE_SECRETS_KEY must be 32 url-safe base64-encoded bytes (Fernet.generate_key())"
        ) from exc


def configured_fernet() -> MultiFernet:
    return fernet_for(settings.MIRRORPLANE_SECRETS_KEYS)


def generate_key() -> str:
    return Fernet.generate_key().decode()


def encrypt_json(value: object, *, fernet: MultiFernet | None = None) -> str:
    return (fernet or configured_fernet()).encrypt(json.dumps(value, sort_keys=True).encode()).decode()


def decrypt_json(token: str, *, fernet: MultiFernet | None = None) -> object:
    try:
        return json.loads((fernet or configured_fernet()).decrypt(token.encode()))
    except InvalidToken as exc:
        raise SecretsKeyError(
            "stored secrets cannot be decrypted with MIRRORPLANE_SECRETS_KEY; list the previous key after "
            "the new one until `manage.py rotate_secrets_key` has re-encrypted them"
        ) from exc


def reencrypt(token: str, *, old: MultiFernet, new: MultiFernet) -> str:
    return encrypt_json(decrypt_json(token, fernet=old), fernet=new)
