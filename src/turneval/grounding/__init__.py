"""Check grounding: is an answer supported by given facts, claim by claim, with citations?

Reproduces the semantics of Vertex AI's check-grounding API: one sentence is one claim; a claim
is grounded when its support from the facts reaches ``citation_threshold`` (default 0.6), and
then cites the facts that support it; the support score is the fraction of claims needing a
check that are grounded; sentences that assert nothing ("Here is what I found.") need no check.
With anti-citations on, a claim that contradicts a fact cites it as an anti-citation, and the
contradiction score is the fraction of claims contradicting some fact.

Two backends: the offline one (default; no network, no model) and any LangChain chat model
(all claims judged in one structured call through the judge layer).

**What the offline backend can and cannot detect.** It matches words, not meaning. A claim's
tokens are its content words, names, numbers and dates (stop words and filler left out; names,
numbers and dates weigh double; an identifier of letters then digits, "ORD1234", is a name). Its score is the weighted share of those tokens found in the
best-matching fact passages (sentences; up to three passages from any facts combined), times
the share of its names, numbers and dates found. Words match by prefix after simple suffix
stripping ("starred" finds "stars"), numbers after removing thousands separators ("1,500" is
"1500") and trailing decimal zeros ("21.50" is "21.5"), and only whole ("12" is not in "0.12",
"5" not in "2.5").

It also reads the claim's and the facts' values (numbers, dates, percentages, amounts of money,
quantities with units, names; see :mod:`turneval.grounding._values`) and compares them whatever
their surface form: "2021-03-03" states "March 3, 2021", "3,700,000" states "3.7 million",
"$21.50" states "21.50 USD", "5 kilometers" states "5 km". A claim whose value differs from
the fact passage it otherwise matches ("founded by Larry Page and Sergey Brin in 1975" against
"... in 1998") is not grounded, whatever its score (which counts that value as not found), and
with anti-citations on it anti-cites that fact once that share (below) reaches
``anti_citation_threshold``. Differs means the passage states another value of the same kind in the value's
slot (the word it is said of: "founded by", "opened on"; one of the claim's own listed values
does not count when another passage states the value) and no passage states the claim's
value there, or, for a number or date no passage states at all, the passage states one of its
kind the claim does not; otherwise matches means that, with the differing values set aside,
the passage holds at least ``citation_threshold`` of the claim's weight (and 2 at least).
A claim that shares a passage's frame (its other words) but names a different person,
number or date also contradicts it (not a passage whose values the claim all states, e.g.
"2021" for "2021-03-03"). It cannot see paraphrases with other words ("passed away" for
"died"), negation ("was not directed by"), relations between the right words in a wrong order
("Cameron starred in a film directed by DiCaprio" reads as supported), spelled-out numbers
("eleven" for 11), aliases ("Oscars" for "Academy Awards"), or coreference beyond
ignoring pronouns. Use the LLM backend where those matter.

The modules of this package hold its parts, from the bottom up: ``records`` (facts, claims,
results, limits), ``codepoints`` (texts as code-point arrays), ``sentences`` (the one sentence
rule, for claims and passages), ``tokens``, ``quantities`` and ``dates`` and ``values`` (what
a text states), ``index`` (the facts' passages and where tokens occur), ``offline`` and ``llm``
(the two backends) and ``check`` (the entry points). Import the names below from
``turneval.grounding``; the modules' other names are the engine's and may change.
"""

from turneval.grounding._check import acheck_grounding, check_grounding
from turneval.grounding._llm import (
    ClaimVerdict,
    GroundingVerdict,
    grounding_request,
    grounding_result,
    grounding_verdict_model,
)
from turneval.grounding._offline import offline_grounding
from turneval.grounding._records import (
    MAX_CANDIDATE_TOKENS,
    MAX_FACT_CHARS,
    MAX_FACTS,
    CitedChunk,
    Claim,
    Fact,
    GroundingResult,
)
from turneval.grounding._sentences import split_claims

__all__ = [
    "CitedChunk",
    "Claim",
    "ClaimVerdict",
    "Fact",
    "GroundingResult",
    "GroundingVerdict",
    "MAX_CANDIDATE_TOKENS",
    "MAX_FACTS",
    "MAX_FACT_CHARS",
    "acheck_grounding",
    "check_grounding",
    "grounding_request",
    "grounding_result",
    "grounding_verdict_model",
    "offline_grounding",
    "split_claims",
]
