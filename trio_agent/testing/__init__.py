"""Testing helpers for trio_agent and for users' own tools.

- A scripted Messages API model (:class:`ScriptedModel`; with
  ``protocol="openai-responses"`` / ``"openai-chat"`` it streams OpenAI's formats),
  served in process
  (``model.transport()``, runs in Trio's virtual time) or on a real loopback socket
  (:func:`serve_scripted_model`).
- The executor harness: :class:`ToolScenario` values, the pure
  :func:`reference_schedule`, :func:`run_scenario` (the real executor in virtual time)
  and :func:`check_trace`.
- The harness for users' own tools: :func:`tool_calls` (hypothesis batches of
  calls), :func:`run_tool_calls` (the real executor with the real tools, in
  virtual or real time) and :func:`check_tool_run`.
- :func:`run_virtual`: one ``trio.run`` in virtual time under a leak check.
- :func:`check_history`: a conversation history is one the Messages API accepts.
- Cassettes: :func:`record` wraps a real client and writes what it sent and got
  (:class:`Cassette`); ``ScriptedModel.from_cassette(path)`` replays it in virtual
  time, each request checked (:class:`CassetteMismatch`).
- :class:`PromptCache`: the Messages API's prompt cache, emulated for a scripted model
  (``ScriptedModel(..., prompt_cache=PromptCache())``), to test caching.

The hypothesis strategies live in :mod:`trio_agent.testing.strategies` and
:func:`scenarios` (they need the ``testing`` extra).
"""

from .. import _util
from ._answers import Answer as Answer
from ._answers import DroppedConnection as DroppedConnection
from ._answers import Faults as Faults
from ._answers import HTTPErrorAnswer as HTTPErrorAnswer
from ._answers import RawAnswer as RawAnswer
from ._answers import ScriptedAnswer as ScriptedAnswer
from ._answers import Timing as Timing
from ._cassette import Cassette as Cassette
from ._cassette import CassetteError as CassetteError
from ._cassette import CassetteMismatch as CassetteMismatch
from ._cassette import Interaction as Interaction
from ._cassette import RecordedExchangeError as RecordedExchangeError
from ._cassette import RecordedRequest as RecordedRequest
from ._cassette import RecordedResponse as RecordedResponse
from ._cassette import Recorder as Recorder
from ._cassette import ToolReplay as ToolReplay
from ._cassette import clone_client as clone_client
from ._cassette import record as record
from ._cassette import recording as recording
from ._checks import CallFacts as CallFacts
from ._checks import RunRecord as RunRecord
from ._checks import check_record as check_record
from ._checks import check_trace as check_trace
from ._driver import TraceEvent as TraceEvent
from ._history import check_history as check_history
from ._leaks import LeakCheck as LeakCheck
from ._leaks import LeakError as LeakError
from ._leaks import Leaks as Leaks
from ._leaks import no_leaks as no_leaks
from ._leaks import process_exited as process_exited
from ._prompt_cache import CacheUse as CacheUse
from ._prompt_cache import PromptCache as PromptCache
from ._reference import CallOutcome as CallOutcome
from ._reference import Schedule as Schedule
from ._reference import reference_schedule as reference_schedule
from ._run_tool import run_tool as run_tool
from ._scenario import ScenarioCall as ScenarioCall
from ._scenario import ScenarioError as ScenarioError
from ._scenario import ToolScenario as ToolScenario
from ._scenario import scenarios as scenarios
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import ScriptedRequest as ScriptedRequest
from ._scripted import ScriptedResponse as ScriptedResponse
from ._scripted import WireProtocol as WireProtocol
from ._scripted_openai import openai_events as openai_events
from ._scripted_openai import plan_openai_stream as plan_openai_stream
from ._scripted_openai import render_openai_sse as render_openai_sse
from ._server import serve_scripted_model as serve_scripted_model
from ._sse_render import StreamPlan as StreamPlan
from ._sse_render import encode_event as encode_event
from ._sse_render import error_event as error_event
from ._sse_render import plan_stream as plan_stream
from ._sse_render import render_events as render_events
from ._sse_render import render_sse as render_sse
from ._tool_calls import ToolCall as ToolCall
from ._tool_calls import ToolCallBatch as ToolCallBatch
from ._tool_calls import tool_calls as tool_calls
from ._tool_checks import check_tool_run as check_tool_run
from ._tool_runs import ToolRun as ToolRun
from ._tool_runs import run_tool_calls as run_tool_calls
from ._trace import InvariantViolation as InvariantViolation
from ._trace import Trace as Trace
from ._trace import result_kind as result_kind
from ._trace import run_scenario as run_scenario
from ._virtual import run_virtual as run_virtual

__all__ = [
    "Answer",
    "CacheUse",
    "CallFacts",
    "CallOutcome",
    "Cassette",
    "CassetteError",
    "CassetteMismatch",
    "DroppedConnection",
    "Faults",
    "HTTPErrorAnswer",
    "Interaction",
    "InvariantViolation",
    "LeakCheck",
    "LeakError",
    "Leaks",
    "PromptCache",
    "RawAnswer",
    "RecordedExchangeError",
    "RecordedRequest",
    "RecordedResponse",
    "Recorder",
    "RunRecord",
    "ScenarioCall",
    "ScenarioError",
    "Schedule",
    "ScriptedAnswer",
    "ScriptedModel",
    "ScriptedRequest",
    "ScriptedResponse",
    "StreamPlan",
    "Timing",
    "ToolCall",
    "ToolCallBatch",
    "ToolReplay",
    "ToolRun",
    "ToolScenario",
    "Trace",
    "TraceEvent",
    "WireProtocol",
    "check_history",
    "check_record",
    "check_tool_run",
    "check_trace",
    "clone_client",
    "encode_event",
    "error_event",
    "no_leaks",
    "openai_events",
    "plan_openai_stream",
    "plan_stream",
    "process_exited",
    "record",
    "recording",
    "reference_schedule",
    "render_events",
    "render_openai_sse",
    "render_sse",
    "result_kind",
    "run_scenario",
    "run_tool",
    "run_tool_calls",
    "run_virtual",
    "scenarios",
    "serve_scripted_model",
    "tool_calls",
]

_util.fixup_module_metadata(__name__, globals())
