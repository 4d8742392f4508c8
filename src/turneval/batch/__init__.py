"""Judge at half price: a run's judge requests through the provider's batch API.

``submit(data, metrics, llm=..., out=...)`` sends every judge request of the run in batches
(OpenAI's Batch API for ``ChatOpenAI``/``AzureChatOpenAI``, Message Batches for
``ChatAnthropic``) and returns a :class:`BatchRun` persisted in the folder ``out``;
``wait()`` follows it, round after round (follow-ups of errored or expired requests, repairs
of invalid answers), and ``collect()`` scores the run from the answers, which are stored in
the judge cache under the keys a live run uses.
"""

from turneval.batch._run import BatchRun
from turneval.batch._state import Fallback
from turneval.batch._status import BatchStatus
from turneval.batch._submit import submit

__all__ = ["BatchRun", "BatchStatus", "Fallback", "submit"]
