"""A judge's context budget: its model's limits and a token counter, known before sending.

Every judge knows how many tokens its model reads and writes (:data:`MODEL_LIMITS`, a table
of common OpenAI, Anthropic and open models, overridden by ``Judge(context_tokens=...,
max_output_tokens=...)``) and counts a request's tokens before sending it:

* OpenAI models are counted with ``tiktoken`` (the ``tokens`` extra), with the model's own
  encoding, as the provider bills them: each message costs its text plus a few tokens of
  framing, and the verdict's JSON schema is counted too;
* other models, and OpenAI models where ``tiktoken`` or its encoding files are not available
  (it downloads them once; offline, point ``TIKTOKEN_CACHE_DIR`` at a folder holding them),
  use :class:`EstimateCounter`, a character estimate calibrated against ``cl100k_base``;
* any function ``text -> tokens`` can be given instead (``Judge(token_counter=...)``), e.g. a
  provider's counting endpoint (Anthropic's ``count_tokens`` needs the network, so it is never
  called unless given).

A :class:`Budget` is what the context policies (:mod:`turneval.judge.context`) plan with, and
what the judge checks last: a request whose prompt and reserved answer exceed the context
window raises :class:`~turneval.errors.ContextBudgetError` and is never sent.

Longer than 400 lines: the model limits table, the three token counters and the budget that
fits a request are one decision (will this request fit?), and the table of models is data.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from turneval.errors import ConfigError, ContextBudgetError

__all__ = [
    "ANSWER_TOKENS",
    "Budget",
    "DEFAULT_LIMITS",
    "EstimateCounter",
    "FunctionCounter",
    "MESSAGE_TOKENS",
    "MODEL_LIMITS",
    "ModelLimits",
    "TOKENS_PER_ITEM",
    "TiktokenCounter",
    "TokenCounter",
    "budget_for",
    "counter_for",
    "limits_for",
    "model_name",
]


@dataclass(frozen=True)
class ModelLimits:
    """How many tokens a model reads and writes.

    Attributes:
        context_tokens: The context window: prompt and answer together.
        max_output_tokens: The longest answer the model writes.
    """

    context_tokens: int
    max_output_tokens: int


# Prefixes of model names (lower case, provider prefixes such as "openai/" removed), longest
# match first. Figures are the providers' published limits.
MODEL_LIMITS: dict[str, ModelLimits] = {
    # OpenAI
    "gpt-5": ModelLimits(400_000, 128_000),
    "gpt-4.1": ModelLimits(1_047_576, 32_768),
    "gpt-4o": ModelLimits(128_000, 16_384),
    "chatgpt-4o": ModelLimits(128_000, 16_384),
    "gpt-4-turbo": ModelLimits(128_000, 4_096),
    "gpt-4-1106": ModelLimits(128_000, 4_096),
    "gpt-4-0125": ModelLimits(128_000, 4_096),
    "gpt-4-32k": ModelLimits(32_768, 4_096),
    "gpt-4": ModelLimits(8_192, 4_096),
    "gpt-3.5-turbo-instruct": ModelLimits(4_096, 4_096),
    "gpt-3.5-turbo": ModelLimits(16_385, 4_096),
    "o1-mini": ModelLimits(128_000, 65_536),
    "o1": ModelLimits(200_000, 100_000),
    "o3": ModelLimits(200_000, 100_000),
    "o4-mini": ModelLimits(200_000, 100_000),
    "gpt-oss": ModelLimits(131_072, 32_768),
    # Anthropic
    "claude-opus-4": ModelLimits(200_000, 32_000),
    "claude-sonnet-4": ModelLimits(200_000, 64_000),
    "claude-haiku-4": ModelLimits(200_000, 64_000),
    "claude-3-7-sonnet": ModelLimits(200_000, 64_000),
    "claude-3-5": ModelLimits(200_000, 8_192),
    "claude-3": ModelLimits(200_000, 4_096),
    # Google
    "gemini-2.5": ModelLimits(1_048_576, 65_536),
    "gemini-2.0": ModelLimits(1_048_576, 8_192),
    "gemini-1.5": ModelLimits(1_048_576, 8_192),
    # Open models (the served context; a server may be configured smaller: pass context_tokens)
    "llama-3.1": ModelLimits(131_072, 4_096),
    "llama-3.2": ModelLimits(131_072, 4_096),
    "llama-3.3": ModelLimits(131_072, 4_096),
    "llama3.1": ModelLimits(131_072, 4_096),
    "llama3.2": ModelLimits(131_072, 4_096),
    "llama3.3": ModelLimits(131_072, 4_096),
    "llama-3": ModelLimits(8_192, 4_096),
    "llama3": ModelLimits(8_192, 4_096),
    "mistral-large": ModelLimits(131_072, 4_096),
    "mistral-small": ModelLimits(32_768, 4_096),
    "mixtral": ModelLimits(32_768, 4_096),
    "qwen3": ModelLimits(32_768, 8_192),
    "qwen2.5": ModelLimits(32_768, 8_192),
    "gemma-3": ModelLimits(131_072, 8_192),
    "gemma3": ModelLimits(131_072, 8_192),
    "gemma-2": ModelLimits(8_192, 4_096),
    "gemma2": ModelLimits(8_192, 4_096),
    "deepseek": ModelLimits(131_072, 8_192),
    "phi-4": ModelLimits(16_384, 4_096),
    "phi4": ModelLimits(16_384, 4_096),
}
"""Context and output limits by model-name prefix (longest prefix wins)."""

DEFAULT_LIMITS = ModelLimits(128_000, 4_096)
"""Limits assumed for a model the table does not know (pass ``context_tokens=`` to be exact)."""

MESSAGE_TOKENS = 4
"""Tokens of framing per chat message (role and separators), as OpenAI counts them; the
answer's priming adds 3 more per request."""

ANSWER_TOKENS = 512
"""Tokens reserved for a verdict's answer when the request does not say (reason and value)."""

TOKENS_PER_ITEM = 96
"""Tokens reserved per item of a per-item verdict (its key, a reason and a value)."""

_SAFETY = 0.02
"""Share of the context kept free against counting differences (the estimate, the server)."""

_MODEL_FIELDS = ("model_name", "model", "model_id", "deployment_name")


def model_name(llm: Any) -> str:
    """The model name a chat model asks for (``gpt-4o``, ``claude-sonnet-4-5``), or ``""``."""
    for name in _MODEL_FIELDS:
        value = getattr(llm, name, None)
        if isinstance(value, str) and value:
            return value
    return ""


def limits_for(name: str) -> ModelLimits | None:
    """The table's limits for a model name (provider prefix ignored), or None when unknown."""
    key = name.lower().rsplit("/", 1)[-1]
    for prefix in sorted(MODEL_LIMITS, key=len, reverse=True):
        if key.startswith(prefix):
            return MODEL_LIMITS[prefix]
    return None


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text for one model's tokenizer."""

    @property
    def name(self) -> str:
        """What counts (``tiktoken:o200k_base``, ``estimate``): recorded on every row."""
        ...

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        ...


_PIECES = re.compile(r"[^\W\d_]+|\d{1,3}|\s+|[^\w\s]+|_+")
_NON_ASCII_WEIGHT = {2: 0.75, 3: 1.0, 4: 2.5}
# ASCII text is counted from its bytes, each kind of piece as _PIECES splits it: ASCII
# characters by class (letter, digit, whitespace, mark: punctuation, controls, underscore).
_ASCII = [chr(code) for code in range(128)]
_LETTER, _DIGIT, _SPACE = (
    {c for c in _ASCII if re.fullmatch(p, c)} for p in (r"[^\W\d_]", r"\d", r"\s")
)
_MARKS = bytes(ord(c) for c in _ASCII if c not in _LETTER | _DIGIT | _SPACE)
_LETTERS_ONLY = bytes(ord(c) if c in _LETTER else 32 for c in _ASCII).ljust(256, b" ")
_DIGITS_ONLY = bytes(48 if c in _DIGIT else 32 for c in _ASCII).ljust(256, b" ")
_SPACES_DIGITS = bytes(32 if c in _SPACE else 48 if c in _DIGIT else 120 for c in _ASCII).ljust(
    256, b"x"
)
# Tokens of a letter run by its length when plain (lower case, upper case or capitalised),
# up to _LONG letters (from 16 on, plain or not, one token per one and a half letters).
_LONG = 63
_PLAIN_TOKENS = [0] + [
    1 + (size - 1) // 4 if size < 16 else math.ceil(size / 1.5) for size in range(1, _LONG + 1)
]


def _ascii_estimate(text: str) -> int:
    """EstimateCounter's count of an ASCII text (the same sum, without a loop over pieces)."""
    data = text.encode("ascii")
    total = len(data) - len(data.translate(None, _MARKS))  # each mark: one
    total += sum((len(run) + 2) // 3 for run in data.translate(_DIGITS_ONLY).split())
    classes = b"x" + data.translate(_SPACES_DIGITS)  # whitespace runs: " ", digits: "0"
    total += classes.count(b"x  ") + classes.count(b"0  ")  # runs of two or more
    total += classes.count(b" 0") - classes.count(b"  0")  # one space before a digit
    words = data.translate(_LETTERS_ONLY).split()
    sizes = list(map(len, words))
    total += sum(map(_PLAIN_TOKENS.__getitem__, map(min, sizes, itertools.repeat(_LONG))))
    for size in filter(_LONG.__lt__, sizes):  # longer than the table: one per 1.5 letters
        total += math.ceil(size / 1.5) - _PLAIN_TOKENS[_LONG]
    for word in itertools.filterfalse(bytes.islower, words):  # a capital: maybe not plain
        if len(word) < 16 and not (word.isupper() or word[1:].islower()):
            total += math.ceil(len(word) / 1.5) - _PLAIN_TOKENS[len(word)]
    return total


class EstimateCounter:
    """A character estimate of tokens, calibrated against ``cl100k_base``.

    The text is split as BPE tokenizers pre-split it (letter runs, digit groups of up to
    three, punctuation, whitespace); an ordinary word is one token per four letters, a run of
    mixed-case letters (an identifier, base64) one per one and a half, a digit group one,
    each punctuation mark one, a non-ASCII character by its UTF-8 length. On English, JSON,
    logs, code, digits, hex and base64, CJK and accented text it gives 0.8 to 1.6 times
    ``cl100k_base``'s count (the tests check it on known texts): a plan made with it keeps
    a safety share of the context free.
    """

    name = "estimate"

    def count(self, text: str) -> int:
        """Estimated tokens of ``text``."""
        if text.isascii():
            return _ascii_estimate(text)
        total = 0.0
        for match in _PIECES.finditer(text):
            piece = match.group()
            first = piece[0]
            if first.isspace():
                following = text[match.end() : match.end() + 1]
                total += 1 if len(piece) > 1 or following.isdigit() else 0
            elif piece.isascii():
                if first.isalpha():
                    plain = piece.islower() or piece.isupper() or piece[1:].islower()
                    total += (
                        1 + (len(piece) - 1) // 4
                        if plain and len(piece) < 16
                        else math.ceil(len(piece) / 1.5)
                    )
                elif first.isdigit():
                    total += 1
                else:
                    total += len(piece)
            else:
                for char in piece:
                    size = len(char.encode())
                    total += 0.25 if size == 1 else _NON_ASCII_WEIGHT[size]
        return math.ceil(total)


class TiktokenCounter:
    """Exact counts with a ``tiktoken`` encoding (special tokens counted as text).

    Args:
        encoding: A ``tiktoken.Encoding``.
    """

    def __init__(self, encoding: Any) -> None:
        """Count with ``encoding``."""
        self.encoding = encoding
        self.name = f"tiktoken:{encoding.name}"

    def count(self, text: str) -> int:
        """Tokens of ``text`` in the encoding."""
        return len(self.encoding.encode(text, disallowed_special=()))


class FunctionCounter:
    """A counter made of a function ``text -> tokens`` (e.g. a provider's counting API).

    Args:
        function: Returns the tokens of a text.
        name: What is recorded as the counter (default ``"custom"``).
    """

    def __init__(self, function: Callable[[str], int], name: str = "custom") -> None:
        """Count with ``function``."""
        self.function = function
        self.name = name

    def count(self, text: str) -> int:
        """``function(text)``."""
        return int(self.function(text))


@functools.lru_cache(maxsize=64)
def _tiktoken_encoding(model: str) -> Any:
    """The model's tiktoken encoding, or None (no tiktoken, unknown model, files unavailable).

    Tried once per model and process: offline, tiktoken's download fails fast and the
    estimate is used from then on.
    """
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        name = tiktoken.encoding_name_for_model(model.rsplit("/", 1)[-1])
    except KeyError:
        return None
    try:
        return tiktoken.get_encoding(name)
    except Exception:  # no network and no cached file: the estimate is used
        return None


_OPENAI_CLASSES = ("ChatOpenAI", "AzureChatOpenAI")


def counter_for(llm: Any) -> TokenCounter:
    """The token counter for a chat model: tiktoken for OpenAI models, else the estimate."""
    name = model_name(llm)
    openai = type(llm).__name__ in _OPENAI_CLASSES or name.startswith(("gpt-", "o1", "o3", "o4"))
    if openai and name:
        encoding = _tiktoken_encoding(name)
        if encoding is not None:
            return TiktokenCounter(encoding)
    return EstimateCounter()


def _as_counter(counter: TokenCounter | Callable[[str], int]) -> TokenCounter:
    if isinstance(counter, TokenCounter):
        return counter
    if callable(counter):
        return FunctionCounter(counter)
    raise ConfigError(
        f"token_counter must be a TokenCounter or a function text -> tokens, got "
        f"{type(counter).__name__}"
    )


@dataclass(frozen=True)
class Budget:
    """A judge's context budget: its limits, where they come from, and its counter.

    Attributes:
        context_tokens: The context window (prompt and answer).
        max_output_tokens: The longest answer the model may write (a model's ``max_tokens``
            when set: the server reserves that much).
        counter: Counts tokens for the model.
        source: ``"given"`` (passed to the judge), ``"table"`` (:data:`MODEL_LIMITS`) or
            ``"default"`` (:data:`DEFAULT_LIMITS`: the model is unknown).
        reserved_output: The model's own ``max_tokens``, which the server reserves whatever
            the answer (None when unset).
    """

    context_tokens: int
    max_output_tokens: int
    counter: TokenCounter
    source: str = "table"
    reserved_output: int | None = None
    # Counts of the texts every request repeats (system prompts, verdict schemas), by text
    # (schemas by identity, kept alive here): counters are functions of the text.
    _memo: dict[Any, tuple[Any, int]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def answer_tokens(self, items: int = 0) -> int:
        """Tokens kept for the answer of a request rating ``items`` items (0: one verdict)."""
        if self.reserved_output is not None:
            return self.reserved_output
        return min(self.max_output_tokens, ANSWER_TOKENS + TOKENS_PER_ITEM * items)

    def max_items(self) -> int:
        """The most items one request may rate so that their answer fits the output limit."""
        room = self.reserved_output if self.reserved_output is not None else self.max_output_tokens
        room = min(room, self.context_tokens // 4)
        return max(1, (room - ANSWER_TOKENS) // TOKENS_PER_ITEM)

    def prompt_tokens(self, answer_tokens: int) -> int:
        """The most prompt tokens a request may send, ``answer_tokens`` kept for the answer.

        A safety share of the context is kept free as well.
        """
        return int(self.context_tokens * (1 - _SAFETY)) - answer_tokens

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        return self.counter.count(text)

    def count_messages(self, texts: Sequence[str], schema: dict[str, Any] | None = None) -> int:
        """Prompt tokens of chat messages with these texts and, if given, a verdict schema."""
        system, *rest = texts or [""]
        total = 3 + MESSAGE_TOKENS * len(texts) + (self._repeated(system, system) if texts else 0)
        total += sum(map(self.counter.count, rest))
        if schema is not None:
            total += self._repeated(id(schema), schema)
        return total

    def _repeated(self, key: Any, value: Any) -> int:
        """Tokens of a text (or a schema's text) that many requests share, counted once."""
        entry = self._memo.get(key)
        if entry is None or entry[0] is not value:
            text = value if isinstance(value, str) else _schema_text(value)
            if len(self._memo) >= 256:
                self._memo.clear()
            entry = self._memo[key] = (value, self.counter.count(text))
        return entry[1]

    def check(self, prompt_tokens: int, answer_tokens: int, what: str) -> None:
        """Raise :class:`ContextBudgetError` when a prompt and its answer cannot fit."""
        if prompt_tokens + answer_tokens > self.context_tokens:
            raise ContextBudgetError(
                f"{what} needs {prompt_tokens:,} prompt tokens + {answer_tokens:,} for the "
                f"answer = {prompt_tokens + answer_tokens:,}, more than the judge's context "
                f"window of {self.context_tokens:,} tokens ({self.describe()}); it was not sent",
                context_tokens=self.context_tokens,
                needed_tokens=prompt_tokens + answer_tokens,
            )

    def describe(self) -> str:
        """``context 8,192 tokens (table), counted by tiktoken:cl100k_base``."""
        return f"context_tokens={self.context_tokens:,} ({self.source}), counted by {self.counter.name}"

    def record(self) -> dict[str, Any]:
        """The budget as a row's details record it."""
        return {
            "context_tokens": self.context_tokens,
            "max_output_tokens": self.max_output_tokens,
            "limits": self.source,
            "counter": self.counter.name,
        }


def _schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"), sort_keys=True)


def budget_for(
    llm: Any,
    *,
    context_tokens: int | None = None,
    max_output_tokens: int | None = None,
    token_counter: TokenCounter | Callable[[str], int] | None = None,
) -> Budget:
    """The budget of a chat model: the given limits, else the table's, else the defaults.

    Raises:
        ConfigError: a limit is not a positive number, or the output limit leaves no room.
    """
    for label, value in (
        ("context_tokens", context_tokens),
        ("max_output_tokens", max_output_tokens),
    ):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            raise ConfigError(f"{label} must be a positive integer, got {value!r}")
    known = limits_for(model_name(llm))
    source = "table" if known is not None else "default"
    limits = known or DEFAULT_LIMITS
    if context_tokens is not None or max_output_tokens is not None:
        source = "given"
    context = context_tokens if context_tokens is not None else limits.context_tokens
    output = max_output_tokens if max_output_tokens is not None else limits.max_output_tokens
    reserved = _int_field(llm, ("max_tokens", "max_completion_tokens"))
    if reserved is not None:
        output = min(output, reserved)
    output = min(output, context // 2)
    if context < 1024:
        raise ConfigError(f"context_tokens must be at least 1024, got {context}")
    counter = _as_counter(token_counter) if token_counter is not None else counter_for(llm)
    return Budget(context, output, counter, source, reserved)


def _int_field(llm: Any, names: Iterable[str]) -> int | None:
    for name in names:
        value = getattr(llm, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
