"""Failure clusters: the failed rows of a run, grouped by why they failed, without embeddings.

A row *failed* when a metric scored it below its bar (``fail_under``, 0.5 by default) or failed
on it (an error), or when :class:`~turneval.metrics.FailureAttribution` attributed it (that
metric is run on failed rows). An attributed row is grouped by its attribution's *reason* (why
it failed, in the judge's words); another by *how* it failed, its signature: the metrics it
failed, each with the agents that failed it when it was scored ``by_agent``
(``tool_permission (flights)``), or the error's type. Rows of the same signature make one
cluster (rule-based reasons are arithmetic, not words worth comparing).

Attributions' reasons are compared as text, with no model: TF-IDF vectors and cosine similarity grouped by
average linkage (scikit-learn, when it is installed), else rapidfuzz's ``WRatio`` of their
words, each row in turn joining the group it is most similar to on average when that is similar
enough. Numbers are left out of the text compared (``3/4``, step indices), and so are common
words and an attribution's agent and step (rows group by why, whoever failed where). Clusters
come largest first.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from turneval._rows import SampleResult

__all__ = [
    "ClusterMethod",
    "DEFAULT_FAIL_UNDER",
    "FailedRow",
    "FailureCluster",
    "cluster_failures",
    "failed_rows",
]

DEFAULT_FAIL_UNDER = 0.5
"""The value below which a row fails a metric, unless ``fail_under`` says otherwise."""

ClusterMethod = Literal["auto", "tfidf", "fuzzy"]
"""How reasons are compared: ``tfidf`` (scikit-learn), ``fuzzy`` (rapidfuzz), ``auto``."""

MIN_SIMILARITY = {"tfidf": 0.2, "fuzzy": 0.55}
"""The similarity rows need to share a cluster, per method (TF-IDF cosine; rapidfuzz's WRatio)."""

_LINKAGE_ROWS = 2000
"""Above this many failed rows, TF-IDF groups rows one by one too (average linkage is n²)."""

_NUMBERS = re.compile(r"\d+(?:[./]\d+)*")
_WORD = re.compile(r"[a-z][a-z_'-]{2,}")
_STOP = frozenset(
    "the and for with that this was were not but are has have had its from into did does "
    "than then when which while who what where why how all any one two out off too very "
    "should would could can will just only also been being over under about after before "
    "step user_input agent".split()
)
_STOP_ALL = _STOP | frozenset(
    "a an as at be by do he in is it me my no of on or so to up us we i you your our their them "
    "they there these those some such own same other each few more most nor both again further "
    "once here because until against between through during above below down".split()
)


@dataclass(frozen=True, slots=True)
class FailedRow:
    """A failed row: where it is, why it failed and, when attributed, whose fault it was.

    Attributes:
        index: The row's index in the run.
        id: The sample's id, if it has one.
        reason: What it is grouped by (the attribution's reason, else the failed metrics').
        metrics: The metrics it failed (the attribution's metric included).
        agent: The agent the attribution blames; None without one.
        step: The decisive step the attribution names (an index in ``user_input``).
        signature: How a row without attribution failed (see the module); None with one.
    """

    index: int
    id: str | None
    reason: str
    metrics: tuple[str, ...]
    agent: str | None = None
    step: int | None = None
    signature: str | None = None


@dataclass
class FailureCluster:
    """Failed rows that failed for similar reasons.

    Attributes:
        rows: The rows, in run order.
        label: The words that mark its reasons most (most frequent, or highest TF-IDF).
        share: Its share of the failed rows.
        name: A short name a judge gave it (:func:`turneval.clusters.name_clusters`), or None.
    """

    rows: list[FailedRow]
    label: str
    share: float
    name: str | None = None
    _agents: Counter[str] = field(default_factory=Counter, repr=False)

    def __post_init__(self) -> None:
        """Count the blamed agents."""
        self._agents = Counter(row.agent for row in self.rows if row.agent is not None)

    @property
    def size(self) -> int:
        """Its number of rows."""
        return len(self.rows)

    @property
    def agents(self) -> dict[str, int]:
        """How often each agent is blamed in it (attributed rows), most blamed first."""
        return dict(self._agents.most_common())

    @property
    def metrics(self) -> dict[str, int]:
        """How many of its rows failed each metric, most first."""
        return dict(Counter(name for row in self.rows for name in row.metrics).most_common())

    def examples(self, n: int = 3) -> list[FailedRow]:
        """Its first ``n`` rows."""
        return self.rows[:n]

    def to_dict(self, examples: int = 3) -> dict[str, Any]:
        """A JSON-ready record: name, label, size, share, agents, metrics, rows and examples."""
        return {
            "name": self.name,
            "label": self.label,
            "size": self.size,
            "share": self.share,
            "agents": self.agents,
            "metrics": self.metrics,
            "rows": [row.index for row in self.rows],
            "examples": [
                {
                    "index": row.index,
                    "id": row.id,
                    "agent": row.agent,
                    "step": row.step,
                    "reason": row.reason,
                }
                for row in self.examples(examples)
            ],
        }


def _attribution(row: SampleResult) -> tuple[str, dict[str, Any]] | None:
    """The row's attribution: its metric's name and ``details["attribution"]``."""
    for name, result in row.results.items():
        found = result.details.get("attribution")
        if isinstance(found, dict):
            return name, found
    return None


def failed_rows(
    rows: Sequence[SampleResult],
    *,
    fail_under: float | Mapping[str, float] = DEFAULT_FAIL_UNDER,
    metrics: Sequence[str] | None = None,
) -> list[FailedRow]:
    """The failed rows of a run, each with what it is grouped by (see the module).

    Args:
        rows: The run's rows.
        fail_under: The value below which a row fails a metric: one bar for every metric, or
            bars by metric name (metrics not named keep :data:`DEFAULT_FAIL_UNDER`).
        metrics: Only these metrics decide which rows failed (default: all); an attribution
            is read whatever this says.
    """
    chosen = None if metrics is None else set(metrics)
    failed: list[FailedRow] = []
    for row in rows:
        attribution = _attribution(row)
        failing: list[tuple[str, str]] = []
        how: list[str] = []  # the signature's parts
        for name, result in row.results.items():
            if chosen is not None and name not in chosen:
                continue
            if attribution is not None and name == attribution[0]:
                continue
            bar = fail_under if isinstance(fail_under, (int, float)) else None
            if bar is None:
                assert isinstance(fail_under, Mapping)
                bar = float(fail_under.get(name, DEFAULT_FAIL_UNDER))
            if result.value < bar:
                failing.append((name, result.reason or f"{name}={result.value:g}"))
                per_agent = result.details.get("by_agent")
                agents = (
                    [a for a, v in per_agent.items() if isinstance(v, (int, float)) and v < bar]
                    if isinstance(per_agent, dict)
                    else []
                )
                how.append(f"{name} ({', '.join(agents)})" if agents else name)
        for name, failure in row.failures.items():
            if chosen is None or name in chosen:
                failing.append((name, f"{failure.error_type}: {failure.message}"))
                how.append(f"{name}: {failure.error_type}")
        if attribution is not None:
            name, found = attribution
            step = found.get("step")
            agent = found.get("agent")
            failed.append(
                FailedRow(
                    row.index,
                    row.sample_id,
                    row.results[name].reason,
                    (*(m for m, _ in failing), name),
                    str(agent) if agent is not None else None,
                    step if isinstance(step, int) and not isinstance(step, bool) else None,
                )
            )
        elif failing:
            reason = "; ".join(f"{name}: {why}" for name, why in failing)
            metrics_failed = tuple(m for m, _ in failing)
            failed.append(
                FailedRow(
                    row.index, row.sample_id, reason, metrics_failed, signature="; ".join(how)
                )
            )
    return failed


_ATTRIBUTED = re.compile(r".*? at step \d+ \(user_input\[\d+\]\)(?:, [^:]*)?: ", re.DOTALL)
"""What :class:`~turneval.metrics.FailureAttribution`'s reason starts with (agent and step):
not compared, so rows group by why, whoever and wherever it was."""


def _text(row: FailedRow) -> str:
    reason = row.reason
    if row.step is not None:
        found = _ATTRIBUTED.match(reason)
        if found is not None:
            reason = reason[found.end() :]
    return _NUMBERS.sub(" ", reason.lower())


def _tfidf_groups(texts: list[str], threshold: float) -> tuple[list[int], list[str]]:
    """Average-linkage groups of TF-IDF vectors (cosine), and each group's top words."""
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_distances

    if len(texts) > _LINKAGE_ROWS:
        return _fuzzy_groups(texts, MIN_SIMILARITY["fuzzy"])
    vectorizer = TfidfVectorizer(
        stop_words=sorted(ENGLISH_STOP_WORDS | _STOP),
        sublinear_tf=True,
        token_pattern=_WORD.pattern,
    )
    try:
        vectors = vectorizer.fit_transform(texts)
    except ValueError:  # no word at all (empty reasons): one group
        return [0] * len(texts), [""]
    if len(texts) == 1:
        labels = [0]
    else:
        distances = cosine_distances(vectors)
        model = AgglomerativeClustering(
            n_clusters=None,
            metric="precomputed",
            linkage="average",
            distance_threshold=1.0 - threshold,
        )
        labels = [int(label) for label in model.fit_predict(distances)]
    words = vectorizer.get_feature_names_out()
    tops = []
    for group in range(max(labels) + 1):
        members = [i for i, label in enumerate(labels) if label == group]
        weights = vectors[members].sum(axis=0).A1
        best = weights.argsort()[::-1][:3]
        tops.append(" · ".join(str(words[i]) for i in best if weights[i] > 0))
    return labels, tops


def _words(text: str) -> str:
    """The text's words without the common ones (what the fuzzy grouping compares)."""
    return " ".join(word for word in _WORD.findall(text) if word not in _STOP_ALL)


def _fuzzy_groups(texts: list[str], threshold: float) -> tuple[list[int], list[str]]:
    """Rows joining, in order, the group they are most similar to on average (WRatio).

    Up to 2000 rows each is compared with every row of every group (its mean similarity to
    the group), beyond with each group's first row only.
    """
    import numpy as np
    from rapidfuzz import fuzz, process

    words = [_words(text) for text in texts]
    full = len(words) <= _LINKAGE_ROWS
    similarity = process.cdist(words, words, scorer=fuzz.WRatio) / 100 if full else None
    groups: list[list[int]] = []
    labels: list[int] = []
    for i, text in enumerate(words):
        best, score = -1, -1.0
        if similarity is not None:
            for group, members in enumerate(groups):
                mean = float(np.mean(similarity[i, members]))
                if mean > score:
                    best, score = group, mean
        elif groups:
            found = process.extractOne(text, [words[g[0]] for g in groups], scorer=fuzz.WRatio)
            if found is not None:
                best, score = found[2], found[1] / 100
        if best >= 0 and score >= threshold:
            groups[best].append(i)
            labels.append(best)
        else:
            groups.append([i])
            labels.append(len(groups) - 1)
    tops = []
    for members in groups:
        counts = Counter(word for i in members for word in set(words[i].split()))
        tops.append(" · ".join(word for word, _ in counts.most_common(3)))
    return labels, tops


def _method(method: ClusterMethod) -> Literal["tfidf", "fuzzy"]:
    if method != "auto":
        return method
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return "fuzzy"
    return "tfidf"


def cluster_failures(
    rows: Sequence[SampleResult],
    *,
    fail_under: float | Mapping[str, float] = DEFAULT_FAIL_UNDER,
    metrics: Sequence[str] | None = None,
    method: ClusterMethod = "auto",
    min_similarity: float | None = None,
) -> list[FailureCluster]:
    """The failed rows grouped by why (or how) they failed, largest group first (ties: earliest row).

    Args:
        rows: The run's rows.
        fail_under: The bar below which a row fails a metric (see :func:`failed_rows`).
        metrics: Only these metrics decide which rows failed (default: all).
        method: ``tfidf`` (scikit-learn), ``fuzzy`` (rapidfuzz) or ``auto`` (``tfidf`` when
            scikit-learn is installed).
        min_similarity: How similar reasons must be to share a cluster (TF-IDF cosine, or
            token-set ratio / 100); default :data:`MIN_SIMILARITY` of the method.

    Above 2000 failed rows, ``tfidf`` groups them as ``fuzzy`` does (one pass, in order):
    average linkage needs every pair's distance.
    """
    failed = failed_rows(rows, fail_under=fail_under, metrics=metrics)
    if not failed:
        return []
    clusters: list[FailureCluster] = []
    attributed = [row for row in failed if row.signature is None]
    if attributed:
        chosen = _method(method)
        threshold = MIN_SIMILARITY[chosen] if min_similarity is None else min_similarity
        groups = _tfidf_groups if chosen == "tfidf" else _fuzzy_groups
        labels, tops = groups([_text(row) for row in attributed], threshold)
        members: dict[int, list[FailedRow]] = {}
        for row, label in zip(attributed, labels, strict=True):
            members.setdefault(label, []).append(row)
        clusters += [
            FailureCluster(found, tops[label], len(found) / len(failed))
            for label, found in members.items()
        ]
    signed: dict[str, list[FailedRow]] = {}
    for row in failed:
        if row.signature is not None:
            signed.setdefault(row.signature, []).append(row)
    clusters += [
        FailureCluster(found, signature, len(found) / len(failed))
        for signature, found in signed.items()
    ]
    clusters.sort(key=lambda cluster: (-cluster.size, cluster.rows[0].index))
    return clusters
