"""The offline backend: a claim's support from the facts' passages, its values, contradictions.

See :mod:`turneval.grounding` for what it can and cannot detect.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from turneval.grounding._index import Index
from turneval.grounding._records import (
    CitedChunk,
    Claim,
    Fact,
    GroundingResult,
    as_facts,
    check_limits,
    check_thresholds,
)
from turneval.grounding._sentences import split_claims
from turneval.grounding._tokens import Token, claim_tokens, needs_check, number_key, token_spans
from turneval.grounding._values import Value, conflicts, equal, values

__all__ = ["offline_grounding"]


@dataclass(slots=True)
class _Support:
    score: float
    passages: list[int]
    masks: list[int] = field(default_factory=list)  # the claim's tokens each passage has


def _weight(mask: int, weights: Sequence[float]) -> float:
    return sum(w for bit, w in enumerate(weights) if mask >> bit & 1)


def _score(covered: int, tokens: Sequence[Token]) -> float:
    """Weighted share of the tokens covered, times the share of critical tokens covered."""
    weights = [t.weight for t in tokens]
    total = sum(weights)
    coverage = _weight(covered, weights) / total if total else 0.0
    critical = [bit for bit, t in enumerate(tokens) if t.critical]
    factor = sum(1 for bit in critical if covered >> bit & 1) / len(critical) if critical else 1.0
    return coverage * factor


def _support(tokens: Sequence[Token], index: Index, max_passages: int = 3) -> _Support:
    """Weighted coverage of a claim's tokens by up to ``max_passages`` passages.

    Passages are chosen greedily (most new weight first); the coverage is multiplied by the
    share of the claim's names, numbers and dates covered.
    """
    weights = [t.weight for t in tokens]
    first = index.first_passages(tokens)  # distinct masks: few, whatever the size
    covered, chosen, masks = 0, [], []
    for _ in range(max_passages):
        best_mask, best_gain = 0, 0.0
        for mask, passage in first.items():
            gain = _weight(mask & ~covered, weights)
            if gain > best_gain or (gain == best_gain and gain > 0 and passage < first[best_mask]):
                best_mask, best_gain = mask, gain
        if not best_gain:
            break
        chosen.append(first.pop(best_mask))
        masks.append(best_mask)
        covered |= best_mask
    return _Support(_score(covered, tokens), chosen, masks)


# -- values: numbers, dates, amounts, names -----------------------------------------------------

_VALUE_CANDIDATES = 5
"""Passages beyond the support's own that a claim's values are compared with (best first)."""


def _claim_values(sentence: str, tokens: Sequence[Token]) -> list[tuple[Value, int]]:
    """The claim's values, each with the bitmask of its tokens (values with no token left out)."""
    bit_of = {t.key: bit for bit, t in enumerate(tokens)}
    spans = token_spans(sentence)
    found = []
    for value in values(sentence):
        bits = 0
        for key, _, start, end in spans:
            if value.start <= start and end <= value.end:
                bits |= 1 << bit_of[key]
        if bits:
            found.append((value, bits))
    return found


def _frame_passages(
    tokens: Sequence[Token], index: Index, frame: int, threshold: float, skip: Sequence[int]
) -> list[tuple[int, int]]:
    """``[(passage, mask)]``: the passages holding most of the claim's frame.

    The frame is the claim's tokens outside its values; a passage must hold at least
    ``threshold`` of its weight. Best first, at most ``_VALUE_CANDIDATES``.
    """
    if not frame or len(tokens) > 63:
        return []
    weights = [t.weight for t in tokens]
    masks = index.mask_array(tokens, lowercase=False)
    cover = np.zeros(masks.size)
    for bit, weight in enumerate(weights):
        if frame >> bit & 1:
            cover += weight * ((masks >> np.uint64(bit)) & np.uint64(1))
    share = cover / _weight(frame, weights)
    hits = np.flatnonzero((share >= threshold) & (cover > 0))
    found = []
    for passage in hits[np.lexsort((hits, -share[hits]))].tolist():
        if passage not in skip:
            found.append((passage, int(masks[passage])))
            if len(found) == _VALUE_CANDIDATES:
                break
    return found


@dataclass(slots=True)
class _ValueCheck:
    score: float
    passages: list[int]  # the passages supporting the claim
    against: dict[int, float]  # {fact: overlap}: facts stating another value in a value's slot


@dataclass(slots=True)
class _Comparison:
    """The claim's values against some passages' values (values by their number in the claim)."""

    equal_bits: dict[int, int]  # passage -> tokens of the claim's values it states
    stated: set[int] = field(default_factory=set)  # stated in their slot by some passage
    anywhere: set[int] = field(default_factory=set)  # stated by some passage
    conflicting: dict[int, set[int]] = field(default_factory=dict)  # passages stating another


def _settled(
    claim_values: Sequence[tuple[Value, int]], passages: Sequence[int], index: Index
) -> bool:
    """Whether every value is stated in its slot (anywhere, without one) by the passages."""
    return all(
        any(
            equal(value, w) and (value.slot is None or w.slot == value.slot)
            for passage in passages
            for w in index.passage_values(passage)
        )
        for value, _ in claim_values
    )


def _compare(
    claim_values: Sequence[tuple[Value, int]], masks: dict[int, int], index: Index
) -> _Comparison:
    """Which passage states which value, in its slot or not, and which states another.

    ``masks`` maps each passage compared to the claim's tokens it holds.
    """
    found = {passage: index.passage_values(passage) for passage in masks}
    result = _Comparison(dict.fromkeys(masks, 0))
    for passage, stated in found.items():
        for number, (value, bits) in enumerate(claim_values):
            if any(equal(value, w) for w in stated):
                result.equal_bits[passage] |= bits
                result.anywhere.add(number)
    listed: dict[str | None, list[Value]] = {}  # the claim's values by slot
    for value, _ in claim_values:
        listed.setdefault(value.slot, []).append(value)
    for passage, stated in found.items():
        for number, (value, _) in enumerate(claim_values):
            in_slot = [w for w in stated if value.slot is not None and w.slot == value.slot]
            if any(equal(value, w) for w in in_slot):
                result.stated.add(number)
                continue
            if number in result.anywhere:  # "in 1903 and 1911" against "in 1903" and, in
                # another passage, "again in 1911": the slot's other value is the list's own
                in_slot = [w for w in in_slot if not any(equal(v, w) for v in listed[value.slot])]
            if any(conflicts(value, w) for w in in_slot):
                result.conflicting.setdefault(number, set()).add(passage)
    named = {  # a name whose words some passage holds is stated ("Titanic stars ...")
        number
        for number, (value, bits) in enumerate(claim_values)
        if value.kind == "name" and any(masks[passage] & bits == bits for passage in found)
    }
    for passage, stated in found.items():  # a value no passage states...
        unclaimed = [w for w in stated if not any(equal(v, w) for v, _ in claim_values)]
        for number, (value, _) in enumerate(claim_values):
            if number not in result.anywhere and number not in named:
                if any(conflicts(value, w) for w in unclaimed):  # ...where one states another
                    result.conflicting.setdefault(number, set()).add(passage)
    return result


def _check_values(
    claim_values: Sequence[tuple[Value, int]],
    tokens: Sequence[Token],
    index: Index,
    support: _Support,
    threshold: float,
) -> _ValueCheck:
    """The claim's support once its values are compared with the passages' values.

    A value equal to one a passage states (in any surface form) counts as covered by it. A value
    *differs* from a passage that states other values of its kind in its slot and none equal to
    it, unless some passage states it in that slot; a value no passage states (a name: whose
    words no passage holds) also differs from a passage stating one of its kind that the claim
    does not state. A passage the
    claim otherwise matches (with the differing values set aside, the passage covers at least
    ``threshold`` of the claim's weight, and at least 2) is stated against the claim: the claim
    is not grounded, and those values count as not covered. Compared: the support's passages,
    and when they leave a value unsettled, the passages holding most of the claim's frame.
    """
    weights = [t.weight for t in tokens]
    full = (1 << len(tokens)) - 1
    masks = dict(zip(support.passages, support.masks, strict=True))
    if not _settled(claim_values, support.passages, index):
        frame = full
        for _, bits in claim_values:
            frame &= ~bits
        masks.update(_frame_passages(tokens, index, frame, threshold, support.passages))
    comparison = _compare(claim_values, masks, index)
    equal_bits = comparison.equal_bits
    against: dict[int, float] = {}
    differing = 0
    for passage in masks:
        aside = 0
        for number, passages in comparison.conflicting.items():
            if number not in comparison.stated and passage in passages:
                aside |= claim_values[number][1]
        rest = full & ~aside
        matched = _weight((masks[passage] | equal_bits[passage]) & rest, weights)
        if aside and rest and matched >= 2 and matched / _weight(rest, weights) >= threshold:
            fact = index.fact_of(passage)
            against[fact] = max(against.get(fact, 0.0), matched / _weight(rest, weights))
            differing |= aside
    covered, supporting = 0, list(support.passages)
    for passage in support.passages:
        covered |= masks[passage] | equal_bits[passage]
    for passage in masks:  # a passage beyond the support's stating a value in another form
        if passage not in support.passages and equal_bits[passage] & ~covered & ~differing:
            covered |= masks[passage] | equal_bits[passage]
            supporting.append(passage)
    return _ValueCheck(_score(covered & ~differing, tokens), supporting, against)


_CRITICAL_IN_PASSAGE = re.compile(r"\d[\d,.]*|(?<=\s)[A-Z][\w'’]+")


def _contradiction(
    tokens: Sequence[Token],
    index: Index,
    threshold: float,
    claim_values: Sequence[tuple[Value, int]] = (),
) -> dict[int, float]:
    """``{fact: strength}`` of the facts a claim contradicts.

    A fact is contradicted when one of its passages shares the claim's frame (at least
    ``threshold`` of its other words, in lower case) and states a name, number or date the
    claim does not, while the claim states one that no fact has. When the claim has values
    (``claim_values``), a passage whose every value the claim states is no contradiction: a
    less precise date ("2021" for "2021-03-03"), a number spelled out ("twelve" for "12").
    """
    frame = [t for t in tokens if not t.critical]
    if not frame or all(len(index.passages_with(t)) for t in tokens if t.critical):
        return {}
    claim_keys = {t.key for t in tokens}
    result: dict[int, float] = {}
    for fact, candidates in index.best_overlaps(frame, threshold, per_fact=5).items():
        for negative, passage in candidates:  # the fact's best-overlapping passages
            text = " " + index.passage_text(passage)
            found = (m.group().lower().rstrip(".,") for m in _CRITICAL_IN_PASSAGE.finditer(text))
            others = {number_key(word) if word[:1].isdigit() else word for word in found}
            if others - claim_keys and not (
                claim_values
                and all(
                    any(equal(w, value) for value, _ in claim_values)
                    for w in index.passage_values(passage)
                )
            ):
                result[fact] = -negative
                break
    return result


def _offline(
    answer: str,
    facts: list[Fact],
    citation_threshold: float,
    claim_scores: bool,
    anti_citations: bool,
    anti_citation_threshold: float,
) -> GroundingResult:
    index = Index(facts)
    claims: list[Claim] = []
    grounded = contradicted = required = 0
    cited: set[int] = set()
    sentences = [
        (text, start, end, claim_tokens(text)) for text, start, end in split_claims(answer)
    ]
    index.prepare([token for *_, tokens in sentences for token in tokens])
    for text, start, end, tokens in sentences:
        claim = Claim(text, start, end)
        claims.append(claim)
        if not needs_check(tokens):
            claim.grounding_check_required = False
            continue
        required += 1
        support = _support(tokens, index)
        score, passages, against = support.score, support.passages, {}
        claim_values = _claim_values(text, tokens)
        if claim_values:
            check = _check_values(claim_values, tokens, index, support, citation_threshold)
            score, passages, against = check.score, check.passages, check.against
        if claim_scores:
            claim.score = round(score, 4)
        if score >= citation_threshold and not against:
            grounded += 1
            claim.citation_indices = sorted({index.fact_of(p) for p in passages})
            cited.update(claim.citation_indices)
        elif anti_citations:
            found = _contradiction(tokens, index, anti_citation_threshold, claim_values)
            found.update((f, o) for f, o in against.items() if o >= anti_citation_threshold)
            claim.anti_citation_indices = sorted(found)
            contradicted += bool(claim.anti_citation_indices)
    support_score = grounded / required if required else 1.0
    contradiction = (contradicted / required if required else 0.0) if anti_citations else None
    chunks = [CitedChunk(i, facts[i].text, dict(facts[i].attributes)) for i in sorted(cited)]
    return GroundingResult(support_score, claims, chunks, contradiction)


def offline_grounding(
    answer: str,
    facts: Sequence[Fact | str],
    *,
    citation_threshold: float = 0.6,
    enable_claim_level_score: bool = False,
    enable_anti_citations: bool = False,
    anti_citation_threshold: float = 0.8,
) -> GroundingResult:
    """The offline backend on its own (sync; limits and thresholds checked as documented)."""
    check_thresholds(
        citation_threshold=citation_threshold, anti_citation_threshold=anti_citation_threshold
    )
    fact_list = as_facts(facts)
    check_limits(answer, fact_list)
    return _offline(
        answer,
        fact_list,
        citation_threshold,
        enable_claim_level_score,
        enable_anti_citations,
        anti_citation_threshold,
    )
