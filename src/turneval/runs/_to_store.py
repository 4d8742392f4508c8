"""The store's sink for front ends that take ``store=``, without loading the store to get there.

The run store is one sink among others: the pipeline and the streamed run make its sink with
:func:`store_sink` and recognise it with :func:`is_store_sink`; SQLAlchemy and the store load
only when a run asks for a store.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:
    from turneval.runs._store import StoreSink
    from turneval.store import RunStore

__all__ = ["is_store_sink", "open_store", "store_sink"]


def store_sink(
    store: RunStore | str | os.PathLike[str],
    *,
    name: str,
    out_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    details: bool = True,
    streamed: bool = False,
) -> StoreSink:
    """A :class:`~turneval.runs.StoreSink` for ``store``, with its arguments."""
    from turneval.runs._store import StoreSink

    return StoreSink(
        store, name=name, out_dir=out_dir, resume=resume, details=details, streamed=streamed
    )


def is_store_sink(sink: object) -> TypeGuard[StoreSink]:
    """Whether ``sink`` is a :class:`~turneval.runs.StoreSink`.

    None exists before its module is loaded, so the store is not loaded to answer.
    """
    module = sys.modules.get("turneval.runs._store")
    return module is not None and isinstance(sink, module.StoreSink)


def open_store(store: RunStore | str | os.PathLike[str] | None) -> RunStore | None:
    """The run store of ``store`` (a store, its URL or path), opened now (None: none)."""
    if store is None:
        return None
    from turneval.store import RunStore

    return RunStore.coerce(store)
