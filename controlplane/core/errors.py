"""Errors services and selectors raise; the API maps them to 400, 409 and 502."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

NON_FIELD = "non_field_errors"


class ServiceValidationError(Exception):
    """Input the engine's rules refuse; `errors` maps a field (or non_field_errors) to messages."""

    def __init__(self, errors: Mapping[str, Sequence[str]], *, details: Sequence[Mapping] = ()) -> None:
        self.errors = {field: list(messages) for field, messages in errors.items()}
        self.details = list(details)  # structured extras, e.g. mm2 file errors with their line numbers
        super().__init__("; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in self.errors.items()))

    @classmethod
    def single(cls, field: str, message: str) -> ServiceValidationError:
        return cls({field: [message]})


class ServiceConflict(Exception):
    """A valid request the current state forbids (e.g. deleting a cluster flows still use)."""


class ClusterUnavailable(Exception):
    """A cluster the request needs did not answer (connection, authentication, timeout)."""

    http_status = 502


class RateLimited(Exception):
    """Too many requests of one user for something that costs the clusters (HTTP 429 with Retry-After)."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
