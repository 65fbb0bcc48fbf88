"""A flow or a cluster saved or deleted, anywhere (a request, a worker, an import): the answers the web
shares for a moment (`controlplane.core.microcache`) start a new generation when it commits. A flow's state
changes by update statements, which send no signal: `lifecycle` bumps the generation itself."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from controlplane.core import microcache
from controlplane.flows.models import Cluster, Flow


@receiver(post_save, sender=Flow)
@receiver(post_delete, sender=Flow)
@receiver(post_save, sender=Cluster)
@receiver(post_delete, sender=Cluster)
def _configuration_changed(**_kwargs) -> None:
    microcache.bump()
