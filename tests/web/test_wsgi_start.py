"""The web process's start-up (`controlplane.wsgi`, what gunicorn loads): every view imported, and what
start-up made frozen out of the cyclic garbage collector's reach, so a full collection during a request
walks the objects requests made, not the process's modules again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import gc, json, sys
import controlplane.wsgi
print(json.dumps({
    "frozen": gc.get_freeze_count(),
    "tracked": len(gc.get_objects()),
    "views imported": all(name in sys.modules for name in (
        "controlplane.web.flows", "controlplane.api.views", "controlplane.metrics.views")),
}))
"""


def test_start_up_imports_every_view_and_freezes_what_it_made():
    answer = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=os.environ, check=True, timeout=120
    )
    start = json.loads(answer.stdout.splitlines()[-1])
    assert start["views imported"], start
    # Left for collections: what the probe itself made since, a few hundred objects; frozen: the rest.
    assert start["frozen"] > 100 * max(start["tracked"], 1), start
