"""trio_agent.lowlevel: the parts most programs never touch, as trio has ``trio.lowlevel``.

``Session``, ``query()``, the clients and the executor (in :mod:`trio_agent`) use
these for you; they are here for writing your own client, loop or store:

- the stream layer's pieces: :class:`MessageAccumulator` (Messages API events in, an
  ``AssistantMessage`` out; pure) and its :class:`AccumulatorStatistics`; what a
  client's ``stream(...)`` yields, :data:`StreamItem` (each :class:`StreamEvent` as
  it arrives, each finished block, and last a :class:`StreamResult` with its
  :class:`StreamStatistics`);
- :class:`RecoverableModelClient`, what the loop's recovery asks of a client beyond
  ``ModelClient`` (``retry``, ``on_retry``, ``create``), and :data:`RetryObserver`;
- :class:`TranscriptWriter`, the JSONL transcript written line by line
  (``Session(transcript_path=...)`` writes one; :func:`trio_agent.read_transcript`
  reads one);
- :func:`block_from_api` and :func:`message_from_api`: Messages API JSON to values
  (the reverse of their ``to_api()``).

Example::

    async with client.stream(model=model, max_tokens=1024, messages=history) as items:
        async for item in items:
            if isinstance(item, trio_agent.lowlevel.StreamResult):
                print(item.message.stop_reason, item.statistics)
"""

from . import _util
from ._messages import block_from_api as block_from_api
from ._messages import message_from_api as message_from_api
from ._model import AccumulatorStatistics as AccumulatorStatistics
from ._model import MessageAccumulator as MessageAccumulator
from ._model import RecoverableModelClient as RecoverableModelClient
from ._model import RetryObserver as RetryObserver
from ._model import StreamEvent as StreamEvent
from ._model import StreamItem as StreamItem
from ._model import StreamResult as StreamResult
from ._model import StreamStatistics as StreamStatistics
from ._session import TranscriptWriter as TranscriptWriter

__all__ = [
    "AccumulatorStatistics",
    "MessageAccumulator",
    "RecoverableModelClient",
    "RetryObserver",
    "StreamEvent",
    "StreamItem",
    "StreamResult",
    "StreamStatistics",
    "TranscriptWriter",
    "block_from_api",
    "message_from_api",
]

_util.fixup_module_metadata(__name__, globals())
