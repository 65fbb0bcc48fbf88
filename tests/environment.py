"""Loaded by pytest before Django's settings (`-p tests.environment` in pyproject.toml).

The settings refuse the public development SECRET_KEY when DEBUG is false, as in production; the suite
runs with DEBUG false too, so it gets a key of its own here (inherited by the worker processes it starts).
"""

from __future__ import annotations

import os
import secrets

os.environ.setdefault("SECRET_KEY", f"tests-{secrets.token_urlsafe(40)}")
