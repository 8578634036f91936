"""trio_agent: run an LLM agent's tool calls while the model is still streaming,
under Trio's structured concurrency."""

from ._exceptions import APIConnectionError as APIConnectionError
from ._exceptions import APIError as APIError
from ._exceptions import APIStatusError as APIStatusError
from ._exceptions import APITimeoutError as APITimeoutError
from ._exceptions import AuthenticationError as AuthenticationError
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
from ._loop._control import TurnControl as TurnControl
from ._loop._query import Compactor as Compactor
from ._loop._query import StopHook as StopHook
from ._loop._query import StopHookResult as StopHookResult
from ._loop._query import query as query
from ._loop._rules import PermissionRuleError as PermissionRuleError
from ._loop._rules import PermissionRules as PermissionRules
from ._loop._state import BlockFinished as BlockFinished
from ._loop._state import Compacted as Compacted
from ._loop._state import ModelFallback as ModelFallback
from ._loop._state import QueryEvent as QueryEvent
from ._loop._state import State as State
from ._loop._state import TextDelta as TextDelta
from ._loop._state import ThinkingDelta as ThinkingDelta
from ._loop._state import Transition as Transition
from ._loop._state import TransitionReason as TransitionReason
from ._loop._state import TurnEnd as TurnEnd
from ._loop._state import TurnEndReason as TurnEndReason
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
from ._messages import block_from_api as block_from_api
from ._messages import message_from_api as message_from_api
from ._model._accumulate import AccumulatorStatistics as AccumulatorStatistics
from ._model._accumulate import MessageAccumulator as MessageAccumulator
from ._model._accumulate import StreamLimits as StreamLimits
from ._model._anthropic import AnthropicClient as AnthropicClient
from ._model._retry import RetryPolicy as RetryPolicy
from ._model._stream import StreamEvent as StreamEvent
from ._model._stream import StreamItem as StreamItem
from ._model._stream import StreamResult as StreamResult
from ._model._stream import StreamStatistics as StreamStatistics
from ._permissions import Allow as Allow
from ._permissions import CanUseTool as CanUseTool
from ._permissions import Deny as Deny
from ._permissions import PermissionDecision as PermissionDecision
from ._permissions import Reject as Reject
from ._session._session import Session as Session
from ._session._transcript import Transcript as Transcript
from ._session._transcript import TranscriptWriter as TranscriptWriter
from ._session._transcript import read_transcript as read_transcript
from ._session._transcript import repair_history as repair_history
from ._tools import Tool as Tool
from ._tools import ToolContext as ToolContext
from ._tools import ToolOutput as ToolOutput
from ._tools import tool as tool

__version__ = "0.1.0"

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AbortReason",
    "AccumulatorStatistics",
    "Allow",
    "AnthropicClient",
    "AssistantMessage",
    "AuthenticationError",
    "BlockFinished",
    "CanUseTool",
    "Compacted",
    "Compactor",
    "ConflictError",
    "ContentBlock",
    "Deny",
    "ExecutorClosedError",
    "ExecutorStatistics",
    "InternalServerError",
    "InvalidRequestError",
    "Message",
    "MessageAccumulator",
    "ModelFallback",
    "NotFoundError",
    "OpaqueBlock",
    "OverloadedError",
    "PermissionDecision",
    "PermissionDeniedError",
    "PermissionRuleError",
    "PermissionRules",
    "PromptTooLongError",
    "QueryEvent",
    "RateLimitError",
    "RedactedThinkingBlock",
    "Reject",
    "RequestTooLargeError",
    "RetryPolicy",
    "ServerToolUseBlock",
    "Session",
    "State",
    "StopHook",
    "StopHookResult",
    "StreamError",
    "StreamEvent",
    "StreamIdleTimeoutError",
    "StreamItem",
    "StreamLimitError",
    "StreamLimits",
    "StreamProtocolError",
    "StreamResult",
    "StreamStatistics",
    "StreamTruncatedError",
    "TextBlock",
    "TextDelta",
    "ThinkingBlock",
    "ThinkingDelta",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolExecutor",
    "ToolFinished",
    "ToolOutput",
    "ToolProgress",
    "ToolResult",
    "ToolResultBlock",
    "ToolUseBlock",
    "Transcript",
    "TranscriptError",
    "TranscriptWriter",
    "Transition",
    "TransitionReason",
    "TrioAgentError",
    "TurnControl",
    "TurnEnd",
    "TurnEndReason",
    "Usage",
    "UserMessage",
    "WorkspaceError",
    "block_from_api",
    "message_from_api",
    "open_tool_executor",
    "query",
    "read_transcript",
    "repair_history",
    "tool",
]
