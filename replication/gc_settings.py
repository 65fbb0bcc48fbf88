"""The cycle collector in the engine's processes (dedicated mode, the replication worker, `bench engine`).

The fetch loop makes a confluent-kafka `Message` per record, an object the cycle collector tracks; a
fetched batch (up to 10,000 of them) is alive through the young collections, so every few batches a full
collection walks the whole heap, everything start-up made with it (the modules; the Django app of a
worker, 135,000 objects). `freeze_after_startup` moves what start-up made out of the collector's reach
(`gc.freeze`): collections walk only what was made since. It took CPU per record 13-22% lower in both a
bare consume-produce loop and the engine, and 23-43% in a process with the worker's modules
(docs/performance.md). The frozen objects are never collected: they are the process's modules and
settings, which live as long as it does.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def freeze_after_startup() -> None:
    """Collect once, then freeze what is left: call once start-up is done, before the hot loops run."""
    gc.collect()
    gc.freeze()
    log.info("start-up done: %d objects frozen out of the cycle collector's walks", gc.get_freeze_count())
