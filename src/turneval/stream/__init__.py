"""Evaluate a JSONL file of any size: read, score and write as it goes, in bounded memory.

:func:`evaluate_jsonl` scores a JSONL file of samples (or OTLP/JSON traces) line by line into
a run folder: results.jsonl (one row per non-blank line, in input order, flushed as written),
summary.json and report.html; :class:`StreamResult` is what it leaves in memory. With
``resume=True`` the rows of an interrupted run are kept and their lines skipped
(:func:`finished_lines`). A :class:`ChunkEngine` scores the chunks elsewhere (Ray:
:func:`turneval.distributed.evaluate_on_ray`).

The package, from the bottom up: :mod:`~turneval.stream.chunks` (the input read into chunks
of numbered lines; a scored :class:`~turneval.stream.chunks.Chunk`),
:mod:`~turneval.stream.scoring` (a chunk scored), :mod:`~turneval.stream.resume` (a partial
run read back), :mod:`~turneval.stream.sink` (rows written, totals, summary, run store),
:mod:`~turneval.stream.workers` (worker processes), :mod:`~turneval.stream.engine` (what an
engine builds on) and :mod:`~turneval.stream.evaluate` (the front end). Each line is read into
a sample by :func:`turneval.sample_lines.parse_line`.
"""

from turneval.stream.chunks import FIRST_ERRORS, UNREADABLE, RowError, is_otlp
from turneval.stream.engine import ChunkEngine
from turneval.stream.evaluate import evaluate_jsonl
from turneval.stream.resume import ResumeWarning, finished_lines
from turneval.stream.sink import StreamResult

__all__ = [
    "ChunkEngine",
    "FIRST_ERRORS",
    "ResumeWarning",
    "RowError",
    "StreamResult",
    "UNREADABLE",
    "evaluate_jsonl",
    "finished_lines",
    "is_otlp",
]
