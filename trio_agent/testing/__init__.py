"""Testing helpers for trio_agent and for users' own tools.

- A scripted Messages API model (:class:`ScriptedModel`), served in process
  (``model.transport()``, runs in Trio's virtual time) or on a real loopback socket
  (:func:`serve_scripted_model`).
- The executor harness: :class:`ToolScenario` values, the pure
  :func:`reference_schedule`, :func:`run_scenario` (the real executor in virtual time)
  and :func:`check_trace`.

The hypothesis strategies live in :mod:`trio_agent.testing.strategies` and
:func:`scenarios` (they need the ``testing`` extra).
"""

from ._answers import Answer as Answer
from ._answers import DroppedConnection as DroppedConnection
from ._answers import Faults as Faults
from ._answers import HTTPErrorAnswer as HTTPErrorAnswer
from ._answers import ScriptedAnswer as ScriptedAnswer
from ._answers import Timing as Timing
from ._checks import check_trace as check_trace
from ._leaks import LeakCheck as LeakCheck
from ._leaks import LeakError as LeakError
from ._leaks import Leaks as Leaks
from ._leaks import no_leaks as no_leaks
from ._reference import CallOutcome as CallOutcome
from ._reference import Schedule as Schedule
from ._reference import reference_schedule as reference_schedule
from ._scenario import ScenarioCall as ScenarioCall
from ._scenario import ScenarioError as ScenarioError
from ._scenario import ToolScenario as ToolScenario
from ._scenario import scenarios as scenarios
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
from ._trace import InvariantViolation as InvariantViolation
from ._trace import Trace as Trace
from ._trace import TraceEvent as TraceEvent
from ._trace import result_kind as result_kind
from ._trace import run_scenario as run_scenario

__all__ = [
    "Answer",
    "CallOutcome",
    "DroppedConnection",
    "Faults",
    "HTTPErrorAnswer",
    "InvariantViolation",
    "LeakCheck",
    "LeakError",
    "Leaks",
    "ScenarioCall",
    "ScenarioError",
    "Schedule",
    "ScriptedAnswer",
    "ScriptedModel",
    "ScriptedRequest",
    "ScriptedResponse",
    "StreamPlan",
    "Timing",
    "ToolScenario",
    "Trace",
    "TraceEvent",
    "check_trace",
    "encode_event",
    "error_event",
    "no_leaks",
    "plan_stream",
    "reference_schedule",
    "render_events",
    "render_sse",
    "result_kind",
    "run_scenario",
    "scenarios",
    "serve_scripted_model",
]
