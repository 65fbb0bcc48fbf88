"""Container health probe for workers and beat: `python -m workers.probe worker|beat [--name NAME]`.

Exits 0 when the process announced itself recently (controlplane.core.presence), 1 otherwise, printing why.
A worker is looked up by its Celery hostname (`celery@<host>` unless started with `-n`).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.probe")
    parser.add_argument("role", choices=["worker", "beat"])
    parser.add_argument(
        "--name", default=f"celery@{socket.gethostname()}", help="the worker's Celery hostname"
    )
    args = parser.parse_args(argv)

    import django

    django.setup()
    from controlplane.core import presence

    try:
        seen = presence.beat_seen() if args.role == "beat" else _worker(presence, args.name)
    except Exception as exc:
        print(f"unhealthy: redis unreachable: {exc}")
        return 1
    if seen is None:
        print(
            f"unhealthy: {args.role} {args.name if args.role == 'worker' else ''} not seen recently".strip()
        )
        return 1
    print(f"healthy: {seen.name} seen {seen.age_s(time.time()):.0f} s ago")
    return 0


def _worker(presence, name: str):
    return next((w for w in presence.workers_seen() if w.name == name), None)


if __name__ == "__main__":
    sys.exit(main())
