"""Engines: where ``evaluate_jsonl(data, metrics, out, engine=...)`` scores a streamed run.

An engine is a small frozen object holding only its own settings; the run options are
``evaluate_jsonl``'s keywords (:class:`~turneval.options.RunOptions`), the same whatever the
engine. The CLI's ``turneval evaluate --engine NAME`` builds the engine of that
:attr:`~Engine.name` from its flags (:data:`ENGINES`).

* :class:`Local` (``local``, the default): this process, or worker processes for rule-based
  metrics.
* :class:`Ray` (``ray``): Ray Data actors on a Ray cluster, one quota for the cluster.
* :class:`Batch` (``batch``): the judge's requests through the provider's batch API, at
  about half price, then the run scored from the answers.

A new engine is one class in one file: subclass :class:`ChunkedEngine` and write ``score``
(each chunk scored, yielded in order), or subclass :class:`Engine` and write ``run``.
"""

from turneval.engines._base import ChunkedEngine, Engine
from turneval.engines._batch import Batch
from turneval.engines._local import Local
from turneval.engines._ray import Ray

__all__ = ["Batch", "ChunkedEngine", "ENGINES", "Engine", "Local", "Ray"]

ENGINES: dict[str, type[Engine]] = {engine.name: engine for engine in (Local, Ray, Batch)}
"""The engines by their command-line names (``turneval evaluate --engine NAME``)."""
