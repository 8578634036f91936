"""Layer 1, the model: bytes from a model API in, stream items out.

SSE parsing (:mod:`._sse`), the pure :class:`MessageAccumulator`, the retry policy,
the stall meter, typed errors from answers, and the clients: one base
(``_client.ProviderClient``: ``stream()`` and ``create()`` once, over the read path of
``_http_stream``) and one :class:`~._provider.Provider` per API, which says only what
differs (``_provider.py``): :class:`AnthropicClient` (the Messages API,
``_anthropic.py``) and :class:`OpenAIClient` (``_openai.py``: the Responses API,
``_openai_responses.py``, or Chat Completions, ``_openai_chat.py``). The layers above
depend only on the :class:`ModelClient` protocol and the stream items.
"""

from .._retry import RetryPolicy as RetryPolicy
from ._accumulate import AccumulatorStatistics as AccumulatorStatistics
from ._accumulate import MessageAccumulator as MessageAccumulator
from ._accumulate import StreamLimits as StreamLimits
from ._anthropic import DEFAULT_BASE_URL as DEFAULT_BASE_URL
from ._anthropic import AnthropicClient as AnthropicClient
from ._errors_http import RETRYABLE_ERROR_TYPES as RETRYABLE_ERROR_TYPES
from ._openai import OPENAI_BASE_URL as OPENAI_BASE_URL
from ._openai import OpenAIClient as OpenAIClient
from ._protocol import ModelClient as ModelClient
from ._protocol import RecoverableModelClient as RecoverableModelClient
from ._protocol import RetryObserver as RetryObserver
from ._protocol import StreamArguments as StreamArguments
from ._sse import SSEParser as SSEParser
from ._stream import StreamEvent as StreamEvent
from ._stream import StreamItem as StreamItem
from ._stream import StreamResult as StreamResult
from ._stream import StreamStatistics as StreamStatistics
