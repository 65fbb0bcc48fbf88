"""Core: errors, roles and users, secrets at rest, the audit log, rate limits, and which runtime processes
are alive. Every other package may import it; it imports none of them.

Its tables are in `controlplane.core.models` (import a model from there)."""

from controlplane.core.audit import (
    AuditFilter,
    audit_list,
    audit_record,
    audit_role_refusal,
    audited_attempt,
)
from controlplane.core.secrets import (
    secrets_key_rotate,
)
from controlplane.core.tokens import (
    api_token_rotate,
)
from controlplane.core.users import (
    user_create_with_role,
    user_set_active,
    user_set_role,
)

__all__ = [
    "AuditFilter",
    "api_token_rotate",
    "audit_list",
    "audit_record",
    "audit_role_refusal",
    "audited_attempt",
    "secrets_key_rotate",
    "user_create_with_role",
    "user_set_active",
    "user_set_role",
]
