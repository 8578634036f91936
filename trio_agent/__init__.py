"""trio_agent: run an LLM agent's tool calls while the model is still streaming,
under Trio's structured concurrency.

The package is the data flow, top to bottom (imports only go down; import-linter
checks it, see ``[tool.importlinter]`` in pyproject.toml)::

    _messages.py _exceptions.py _tools.py _tool_schema.py _permissions.py
    _options.py _retry.py _hooks.py _output.py
                  the shared vocabulary: wire values, errors, Tool (and its schema from
                  type hints), permission answers, TurnOptions (every option of a
                  turn, in one value), RetryPolicy, Hooks, typed outputs
    _model/       Layer 1: bytes -> stream items. ModelClient (the protocol the loop
                  depends on), SSE, MessageAccumulator, RetryPolicy, the stall meter,
                  AnthropicClient, OpenAIClient (Responses / Chat Completions)
    _executor/    Layer 2: tool_use blocks -> ToolResult (in order) and ToolProgress
                  (at once). open_tool_executor / ToolExecutor (scheduling, cancel
                  scopes, results) and the call and its task (_call.py)
    _loop/        Layer 3: query(), one user turn: a model call per iteration
                  (_model_call.py), the frozen State and its pure transitions
                  (_state.py, _recovery.py), TurnControl, PermissionRules
    _session/     Layer 4: Session (history, usage, interrupt/abort), the transcript
    _cli/         the trio-agent command: demo, run, chat, replay, stream, worker,
                  submit, view; the live view
    _viewer/      trio-agent view: sessions as local, read-only web pages (the view extra)
    lowlevel.py   the public face for what most programs never touch: the accumulator,
                  the stream items, the transcript writer, Messages API JSON to values
    tools/        the built-in tools (public)
    testing/      the scripted model, the property-based harness, cassettes (record and
                  replay) and the pytest plugin (public)
    mcp/          MCP servers as tools (the mcp extra)
    durable/      durable turns over DBOS, workers (the durable extra)
    otel/         OpenTelemetry GenAI spans (the otel extra)
    aio/          the same turns from asyncio apps (FastAPI...), in Trio's guest mode

Each subpackage's ``__init__`` is the face the layer above imports from. Every name a
public face exports reports that face as its module (``_util.fixup_module_metadata``).

"Why didn't my tool start?" The decision is made in one place,
``trio_agent/_executor/_executor.py`` (the scheduling loop of ``ToolExecutor``); turn
on ``logging.getLogger("trio_agent.executor").setLevel(logging.DEBUG)`` to see each
decision and its reason (not concurrency-safe while another tool runs, the
concurrency cap, behind a non-safe tool); a call ``can_use_tool`` refused shows in
its ``ToolResult``. docs/DESIGN.md is the long version of this map.
"""

import importlib as _importlib
import sys as _sys
import typing as _typing

__version__ = "0.1.0"

# Every public name and the module that defines it, imported the first time the name
# is used (PEP 562): ``import trio_agent`` imports none of the library, so
# ``trio-agent --version`` answers before trio or httpx is imported. To export a
# name, add its line here and the same import under ``if TYPE_CHECKING:`` below
# (what type checkers read); tests/cli/test_cli_startup.py checks the two agree.
_EXPORTS: dict[str, str] = {
    "APIConnectionError": "._exceptions",
    "APIError": "._exceptions",
    "APIStatusError": "._exceptions",
    "APITimeoutError": "._exceptions",
    "ApprovalError": "._exceptions",
    "AuthenticationError": "._exceptions",
    "ClientClosedError": "._exceptions",
    "CompactionError": "._exceptions",
    "ConflictError": "._exceptions",
    "ExecutorClosedError": "._exceptions",
    "InternalServerError": "._exceptions",
    "InvalidRequestError": "._exceptions",
    "NotFoundError": "._exceptions",
    "OverloadedError": "._exceptions",
    "PermissionDeniedError": "._exceptions",
    "PromptTooLongError": "._exceptions",
    "RateLimitError": "._exceptions",
    "RequestTooLargeError": "._exceptions",
    "StreamError": "._exceptions",
    "StreamIdleTimeoutError": "._exceptions",
    "StreamLimitError": "._exceptions",
    "StreamProtocolError": "._exceptions",
    "StreamStalledError": "._exceptions",
    "StreamTruncatedError": "._exceptions",
    "ToolDefinitionError": "._exceptions",
    "TranscriptError": "._exceptions",
    "TrioAgentError": "._exceptions",
    "WorkspaceError": "._exceptions",
    "AbortReason": "._executor",
    "ExecutorStatistics": "._executor",
    "ToolExecutor": "._executor",
    "ToolFinished": "._executor",
    "ToolProgress": "._executor",
    "ToolResult": "._executor",
    "open_tool_executor": "._executor",
    "AttemptDiscarded": "._loop",
    "BlockFinished": "._loop",
    "CacheBust": "._loop",
    "Compacted": "._loop",
    "ModelFallback": "._loop",
    "PendingApprovals": "._loop",
    "PermissionRuleError": "._loop",
    "PermissionRules": "._loop",
    "QueryEvent": "._loop",
    "Stall": "._loop",
    "TextDelta": "._loop",
    "ThinkingDelta": "._loop",
    "ToolInputDelta": "._loop",
    "Transition": "._loop",
    "TransitionReason": "._loop",
    "TurnControl": "._loop",
    "TurnEnd": "._loop",
    "TurnEndReason": "._loop",
    "UnknownToolWarning": "._loop",
    "query": "._loop",
    "summarizing_compactor": "._loop",
    "AssistantMessage": "._messages",
    "ContentBlock": "._messages",
    "Message": "._messages",
    "OpaqueBlock": "._messages",
    "RedactedThinkingBlock": "._messages",
    "ServerToolUseBlock": "._messages",
    "TextBlock": "._messages",
    "ThinkingBlock": "._messages",
    "ToolResultBlock": "._messages",
    "ToolUseBlock": "._messages",
    "Usage": "._messages",
    "UserMessage": "._messages",
    "AnthropicClient": "._model",
    "ModelClient": "._model",
    "OpenAIClient": "._model",
    "RetryPolicy": "._model",
    "StreamLimits": "._model",
    "DEFAULT_MODEL": "._models",
    "ModelDeprecationWarning": "._models",
    "Compactor": "._options",
    "StopHook": "._options",
    "StopHookResult": "._options",
    "TurnOptions": "._options",
    "Allow": "._permissions",
    "CanUseTool": "._permissions",
    "Defer": "._permissions",
    "Deny": "._permissions",
    "PermissionDecision": "._permissions",
    "Reject": "._permissions",
    "Session": "._session",
    "RunResult": "._session",
    "run": "._session",
    "PartialOutput": "._loop",
    "OutputRejected": "._output",
    "OutputValidationError": "._output",
    "Ask": "._hooks",
    "HookError": "._hooks",
    "Hooks": "._hooks",
    "ToolCall": "._hooks",
    "Transcript": "._session",
    "read_transcript": "._session",
    "repair_history": "._session",
    "Tool": "._tools",
    "ToolContext": "._tools",
    "ToolOutput": "._tools",
    "tool": "._tools",
    "TurnInfo": "._tools",
    "SubagentTurn": "._loop",
    "SubagentText": "._subagent",
    "SubagentToolFinished": "._subagent",
    "SubagentToolProgress": "._subagent",
    "SubagentToolStarted": "._subagent",
    "subagent": "._subagent",
}

if _typing.TYPE_CHECKING:
    from . import lowlevel as lowlevel
    from ._exceptions import APIConnectionError as APIConnectionError
    from ._exceptions import APIError as APIError
    from ._exceptions import APIStatusError as APIStatusError
    from ._exceptions import APITimeoutError as APITimeoutError
    from ._exceptions import ApprovalError as ApprovalError
    from ._exceptions import AuthenticationError as AuthenticationError
    from ._exceptions import ClientClosedError as ClientClosedError
    from ._exceptions import CompactionError as CompactionError
    from ._exceptions import ConflictError as ConflictError
    from ._exceptions import ExecutorClosedError as ExecutorClosedError
    from ._exceptions import InternalServerError as InternalServerError
    from ._exceptions import InvalidRequestError as InvalidRequestError
    from ._exceptions import NotFoundError as NotFoundError
    from ._exceptions import OverloadedError as OverloadedError
    from ._exceptions import PermissionDeniedError as PermissionDeniedError
    from ._exceptions import PromptTooLongError as PromptTooLongError
    from ._exceptions import RateLimitError as RateLimitError
    from ._exceptions import RequestTooLargeError as RequestTooLargeError
    from ._exceptions import StreamError as StreamError
    from ._exceptions import StreamIdleTimeoutError as StreamIdleTimeoutError
    from ._exceptions import StreamLimitError as StreamLimitError
    from ._exceptions import StreamProtocolError as StreamProtocolError
    from ._exceptions import StreamStalledError as StreamStalledError
    from ._exceptions import StreamTruncatedError as StreamTruncatedError
    from ._exceptions import ToolDefinitionError as ToolDefinitionError
    from ._exceptions import TranscriptError as TranscriptError
    from ._exceptions import TrioAgentError as TrioAgentError
    from ._exceptions import WorkspaceError as WorkspaceError
    from ._executor import AbortReason as AbortReason
    from ._executor import ExecutorStatistics as ExecutorStatistics
    from ._executor import ToolExecutor as ToolExecutor
    from ._executor import ToolFinished as ToolFinished
    from ._executor import ToolProgress as ToolProgress
    from ._executor import ToolResult as ToolResult
    from ._executor import open_tool_executor as open_tool_executor
    from ._hooks import Ask as Ask
    from ._hooks import HookError as HookError
    from ._hooks import Hooks as Hooks
    from ._hooks import ToolCall as ToolCall
    from ._loop import AttemptDiscarded as AttemptDiscarded
    from ._loop import BlockFinished as BlockFinished
    from ._loop import CacheBust as CacheBust
    from ._loop import Compacted as Compacted
    from ._loop import ModelFallback as ModelFallback
    from ._loop import PartialOutput as PartialOutput
    from ._loop import PendingApprovals as PendingApprovals
    from ._loop import PermissionRuleError as PermissionRuleError
    from ._loop import PermissionRules as PermissionRules
    from ._loop import QueryEvent as QueryEvent
    from ._loop import Stall as Stall
    from ._loop import SubagentTurn as SubagentTurn
    from ._loop import TextDelta as TextDelta
    from ._loop import ThinkingDelta as ThinkingDelta
    from ._loop import ToolInputDelta as ToolInputDelta
    from ._loop import Transition as Transition
    from ._loop import TransitionReason as TransitionReason
    from ._loop import TurnControl as TurnControl
    from ._loop import TurnEnd as TurnEnd
    from ._loop import TurnEndReason as TurnEndReason
    from ._loop import UnknownToolWarning as UnknownToolWarning
    from ._loop import query as query
    from ._loop import summarizing_compactor as summarizing_compactor
    from ._messages import AssistantMessage as AssistantMessage
    from ._messages import ContentBlock as ContentBlock
    from ._messages import Message as Message
    from ._messages import OpaqueBlock as OpaqueBlock
    from ._messages import RedactedThinkingBlock as RedactedThinkingBlock
    from ._messages import ServerToolUseBlock as ServerToolUseBlock
    from ._messages import TextBlock as TextBlock
    from ._messages import ThinkingBlock as ThinkingBlock
    from ._messages import ToolResultBlock as ToolResultBlock
    from ._messages import ToolUseBlock as ToolUseBlock
    from ._messages import Usage as Usage
    from ._messages import UserMessage as UserMessage
    from ._model import AnthropicClient as AnthropicClient
    from ._model import ModelClient as ModelClient
    from ._model import OpenAIClient as OpenAIClient
    from ._model import RetryPolicy as RetryPolicy
    from ._model import StreamLimits as StreamLimits
    from ._models import DEFAULT_MODEL as DEFAULT_MODEL
    from ._models import ModelDeprecationWarning as ModelDeprecationWarning
    from ._options import Compactor as Compactor
    from ._options import StopHook as StopHook
    from ._options import StopHookResult as StopHookResult
    from ._options import TurnOptions as TurnOptions
    from ._output import OutputRejected as OutputRejected
    from ._output import OutputValidationError as OutputValidationError
    from ._permissions import Allow as Allow
    from ._permissions import CanUseTool as CanUseTool
    from ._permissions import Defer as Defer
    from ._permissions import Deny as Deny
    from ._permissions import PermissionDecision as PermissionDecision
    from ._permissions import Reject as Reject
    from ._session import RunResult as RunResult
    from ._session import Session as Session
    from ._session import Transcript as Transcript
    from ._session import read_transcript as read_transcript
    from ._session import repair_history as repair_history
    from ._session import run as run
    from ._subagent import SubagentText as SubagentText
    from ._subagent import SubagentToolFinished as SubagentToolFinished
    from ._subagent import SubagentToolProgress as SubagentToolProgress
    from ._subagent import SubagentToolStarted as SubagentToolStarted
    from ._subagent import subagent as subagent
    from ._tools import Tool as Tool
    from ._tools import ToolContext as ToolContext
    from ._tools import ToolOutput as ToolOutput
    from ._tools import TurnInfo as TurnInfo
    from ._tools import tool as tool
else:
    __all__ = sorted(_EXPORTS)

    def __getattr__(name: str) -> object:
        return _load(name)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__, "lowlevel"})


def _load(name: str) -> object:
    """``trio_agent.NAME`` the first time: import its module and bind every public
    name of the modules imported so far, each made to report ``trio_agent`` as its
    module (``_util.fixup_module_metadata``), before any of them is handed out."""
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(module, __name__), name)
        _bind_loaded()
        return value
    if name == "lowlevel":
        return _importlib.import_module(".lowlevel", __name__)
    if not name.startswith("_"):  # (``from . import _x`` asks for ``_x`` first)
        # Every name of trio_agent.lowlevel moved there from here (issue 21): the old
        # names work, with a DeprecationWarning pointing at the caller's line.
        lowlevel = _importlib.import_module(".lowlevel", __name__)
        if name in lowlevel.__all__:
            import warnings

            warnings.warn(
                f"{__name__}.{name} is deprecated: use trio_agent.lowlevel.{name}",
                DeprecationWarning,
                stacklevel=3,
            )
            return getattr(lowlevel, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _bind_loaded() -> None:
    from . import _util

    namespace = globals()
    loaded: dict[str, object] = {}
    for name, module in _EXPORTS.items():
        defining = _sys.modules.get(__name__ + module)
        if name not in namespace and defining is not None and hasattr(defining, name):
            loaded[name] = getattr(defining, name)
    _util.fixup_module_metadata(__name__, {"__all__": list(loaded), **loaded})
    namespace.update(loaded)
