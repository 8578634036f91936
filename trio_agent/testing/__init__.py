"""Testing helpers: a scripted Messages API model, served in process or on loopback.

The hypothesis strategies live in :mod:`trio_agent.testing.strategies` (they need the
``testing`` extra).
"""

from ._answers import Answer as Answer
from ._answers import DroppedConnection as DroppedConnection
from ._answers import Faults as Faults
from ._answers import HTTPErrorAnswer as HTTPErrorAnswer
from ._answers import ScriptedAnswer as ScriptedAnswer
from ._answers import Timing as Timing
from ._leaks import LeakCheck as LeakCheck
from ._leaks import LeakError as LeakError
from ._leaks import Leaks as Leaks
from ._leaks import no_leaks as no_leaks
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import ScriptedRequest as ScriptedRequest
from ._scripted import ScriptedResponse as ScriptedResponse
from ._server import serve_scripted_model as serve_scripted_model
from ._sse_render import StreamPlan as StreamPlan
from ._sse_render import encode_event as encode_event
from ._sse_render import error_event as error_event
from ._sse_render import plan_stream as plan_stream
from ._sse_render import render_events as render_events
from ._sse_render import render_sse as render_sse

__all__ = [
    "Answer",
    "DroppedConnection",
    "Faults",
    "HTTPErrorAnswer",
    "LeakCheck",
    "LeakError",
    "Leaks",
    "ScriptedAnswer",
    "ScriptedModel",
    "ScriptedRequest",
    "ScriptedResponse",
    "StreamPlan",
    "Timing",
    "encode_event",
    "error_event",
    "no_leaks",
    "plan_stream",
    "render_events",
    "render_sse",
    "serve_scripted_model",
]
