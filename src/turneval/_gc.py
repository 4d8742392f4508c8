"""The cyclic garbage collector's policy while a large batch is scored.

Scoring allocates many short-lived containers while the batch's samples and rows stay alive.
With CPython's default thresholds (700 allocations) the collector then walks every live sample
again and again: validating 50,000 lines while keeping them was measured 6x slower with the
collector on than off. While a batch is scored, :func:`batch_collection` freezes what already
exists (the dataset, the metrics, the imported modules: never walked again until the batch
ends) and raises the young generation's threshold, so a collection runs about once per
:data:`YOUNG_THRESHOLD` surviving allocations instead of every 700. Cyclic garbage is still
collected; memory stays bounded.

Nested and concurrent batches (threads) share one policy: the first to enter applies it, the
last to leave restores the thresholds it found and unfreezes what it froze. A process that
froze objects itself (``gc.freeze()``) keeps them frozen; nothing is frozen or unfrozen then.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 100_000
"""Allocations (net of deallocations) between young collections while a batch is scored."""


class _Policy:
    """Who applied the policy, and what to restore when the last batch ends."""

    enabled = True  # False: batches run under the collector's defaults (benchmarks compare)
    lock = threading.Lock()
    depth = 0
    thresholds: tuple[int, int, int] = (700, 10, 10)
    froze = False
    process_frozen = False  # freeze_process() ran: skip the check (it walks every frozen object)


def freeze_process() -> None:
    """Freeze what exists now for the rest of the process (a worker process after start-up).

    The collector never walks those objects again, and batches skip their own freeze check
    (``gc.get_freeze_count()`` walks every frozen object: milliseconds per batch).
    """
    gc.freeze()
    _Policy.process_frozen = True


@contextmanager
def batch_collection() -> Iterator[None]:
    """Apply the batch policy (freeze, raised young threshold) for the ``with`` block."""
    if not _Policy.enabled:
        yield
        return
    with _Policy.lock:
        if _Policy.depth == 0:
            _Policy.thresholds = gc.get_threshold()
            _Policy.froze = not _Policy.process_frozen and gc.get_freeze_count() == 0
            if _Policy.froze:
                gc.freeze()
            _, middle, old = _Policy.thresholds
            gc.set_threshold(YOUNG_THRESHOLD, middle, old)
        _Policy.depth += 1
    try:
        yield
    finally:
        with _Policy.lock:
            _Policy.depth -= 1
            if _Policy.depth == 0:
                gc.set_threshold(*_Policy.thresholds)
                if _Policy.froze:
                    gc.unfreeze()
                _Policy.froze = False
