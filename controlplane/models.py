"""The app's models as Django loads them: each domain package owns its tables (`controlplane/<package>/models.py`,
data only), all in the one app `controlplane` with one migration history; importing them here registers them.

Import a model from the package that owns it (`from controlplane.flows.models import Flow`), never from here:
this module imports every domain, so a contract in `pyproject.toml` forbids importing it.
"""

import controlplane.alerts.models
import controlplane.assurance.models
import controlplane.core.models
import controlplane.flows.models
import controlplane.operations.models
import controlplane.reports.models
import controlplane.status.models  # noqa: F401
