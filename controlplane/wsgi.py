"""WSGI entry point (gunicorn controlplane.wsgi).

Start-up imports every view (the URLconf) and then moves what it made out of the cyclic garbage collector's
reach (`gc.freeze()`): the modules, classes and functions a web process holds for its whole life, about
165,000 objects, which every full collection otherwise walks again (about 0.1 s each on a busy machine,
while the process's other request threads wait on the GIL). Freezing only skips them; they are never
garbage, so nothing is kept that would have been freed.
"""

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 (imports every view before the freeze)
gc.collect()
gc.freeze()
