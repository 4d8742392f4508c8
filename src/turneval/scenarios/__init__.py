"""Test sets that grow themselves: scenarios generated from tools, worlds, conversations, failures.

``generate(source, llm=..., n=..., seed=...)`` (and ``agenerate``) asks a chat model for
:class:`~turneval.simulation.Scenario` rows and returns a :class:`GenerationResult`: the
scenarios kept, those left out with their reasons, and a :class:`Coverage` table. Sources:

* :func:`from_tools`: goals that need LangChain tools, OpenAI tool schemas or an MCP
  server's ``tools/list`` (alone and in pairs), with personas and difficulties;
* :func:`from_world`: goals on a :class:`~turneval.worlds.ToolWorld` whose reference actions
  are replayed on a fresh copy: kept with their expected end state when they succeed,
  discarded with the world's error when they do not;
* :func:`from_conversations`, :func:`from_traces`, :func:`from_stored_run`: real
  conversations distilled into goal, persona and facts, personal data replaced
  (:class:`~turneval.scenarios.pii.Scrubber`);
* :func:`from_failures`: a run's failed rows, grouped, become near-miss variants;
* :func:`perturb`: paraphrases, persona swaps and added constraints of scenarios you have.

Generation is a judged job (:class:`GenerationJob`): cache, limits, retries, a progress file
(a rerun pays for nothing twice), :func:`estimate_generation` (the dry run) and
:func:`submit_batch` (a provider's batch API). Answers follow schemas with one property per
scenario, so a schema-valid answer always holds exactly the scenarios asked for. Near
duplicates are removed (:func:`deduplicate`); every scenario records its source, seed and
generator model in ``metadata["generated"]``. :meth:`GenerationResult.write_jsonl` writes
what ``Scenario.from_jsonl``, ``simulate`` and ``EvalTask`` read; :func:`load` reads it back
with its world attached; :func:`submit_for_review` puts scenarios in the viewer's labeling
queue to accept or reject first.
"""

from turneval.scenarios._distill import (
    ConversationsSource,
    from_conversations,
    from_stored_run,
    from_traces,
)
from turneval.scenarios._drafts import DIFFICULTIES, FAULT_KINDS, MAX_TURNS, PERSONA_TYPES
from turneval.scenarios._engine import (
    DEFAULT_TEMPERATURE,
    OUTPUT_TOKENS_PER_SCENARIO,
    FailedRequest,
    GenerationEstimate,
    GenerationJob,
    GenerationResult,
    agenerate,
    as_source,
    estimate_generation,
    generate,
    open_batch,
    submit_batch,
)
from turneval.scenarios._failures import NEAR_MISSES, FailuresSource, from_failures
from turneval.scenarios._files import faulty_world, load, write_scenarios
from turneval.scenarios._perturbations import PERTURBATIONS, PerturbSource, perturb
from turneval.scenarios._quality import (
    DEFAULT_DEDUP_THRESHOLD,
    Coverage,
    Discarded,
    coverage,
    deduplicate,
    goal_similarity,
)
from turneval.scenarios._review import Review, review_path, reviewed, submit_for_review
from turneval.scenarios._sources import (
    Ask,
    ScenarioSource,
    Slot,
    ToolsSource,
    WorldSource,
    from_tools,
    from_world,
)
from turneval.scenarios._tools import ToolInfo, read_tools
from turneval.scenarios.pii import Scrubber

__all__ = [
    "Ask",
    "ConversationsSource",
    "Coverage",
    "DEFAULT_DEDUP_THRESHOLD",
    "DEFAULT_TEMPERATURE",
    "DIFFICULTIES",
    "Discarded",
    "FAULT_KINDS",
    "FailedRequest",
    "FailuresSource",
    "GenerationEstimate",
    "GenerationJob",
    "GenerationResult",
    "MAX_TURNS",
    "NEAR_MISSES",
    "OUTPUT_TOKENS_PER_SCENARIO",
    "PERSONA_TYPES",
    "PERTURBATIONS",
    "PerturbSource",
    "Review",
    "ScenarioSource",
    "Scrubber",
    "Slot",
    "ToolInfo",
    "ToolsSource",
    "WorldSource",
    "agenerate",
    "as_source",
    "coverage",
    "deduplicate",
    "estimate_generation",
    "faulty_world",
    "from_conversations",
    "from_failures",
    "from_stored_run",
    "from_tools",
    "from_traces",
    "from_world",
    "generate",
    "goal_similarity",
    "load",
    "open_batch",
    "perturb",
    "read_tools",
    "review_path",
    "reviewed",
    "submit_batch",
    "submit_for_review",
    "write_scenarios",
]
