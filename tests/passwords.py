"""The suite's password hasher: Django's PBKDF2 with few iterations.

Production's PBKDF2 (1,000,000 iterations) costs 0.4 s of a core per password set or checked at load,
and the suite sets or checks one for most users it makes. This one keeps the algorithm's name, so a
production process the tests start (gunicorn, Celery workers) checks its hashes (upgrading them to its own
iterations on a sign-in, as it does a hash of an older release) and the test process checks theirs."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FewIterationsPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
