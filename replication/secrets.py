"""Secret masking shared by logs, the `validate` listing and the control plane (pure, no client imports)."""

from __future__ import annotations

import re
from collections.abc import Mapping

SECRET_PROPERTY = re.compile(
    r"(password|secret|jaas\.config|ssl\.key\.pem|keystore|token|user\.info)", re.IGNORECASE
)
MASK = "******"


def is_secret_property(name: str) -> bool:
    return SECRET_PROPERTY.search(name) is not None


def mask_secrets(properties: Mapping[str, str]) -> dict[str, str]:
    """A copy safe to log: every secret-looking property value replaced by ******."""
    return {key: (MASK if is_secret_property(key) else value) for key, value in properties.items()}
