"""trio_agent: run an LLM agent's tool calls while the model is still streaming,
under Trio's structured concurrency."""

from ._accumulate import AccumulatorStatistics as AccumulatorStatistics
from ._accumulate import MessageAccumulator as MessageAccumulator
from ._accumulate import StreamLimits as StreamLimits
from ._client import AnthropicClient as AnthropicClient
from ._control import TurnControl as TurnControl
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
from ._executor import ToolExecutor as ToolExecutor
from ._executor import open_tool_executor as open_tool_executor
from ._loop import Compactor as Compactor
from ._loop import StopHook as StopHook
from ._loop import StopHookResult as StopHookResult
from ._loop import query as query
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
from ._permissions import Allow as Allow
from ._permissions import CanUseTool as CanUseTool
from ._permissions import Deny as Deny
from ._permissions import PermissionDecision as PermissionDecision
from ._permissions import Reject as Reject
from ._results import AbortReason as AbortReason
from ._results import ExecutorStatistics as ExecutorStatistics
from ._results import ToolFinished as ToolFinished
from ._results import ToolProgress as ToolProgress
from ._results import ToolResult as ToolResult
from ._retry import RetryPolicy as RetryPolicy
from ._rules import PermissionRuleError as PermissionRuleError
from ._rules import PermissionRules as PermissionRules
from ._state import BlockFinished as BlockFinished
from ._state import Compacted as Compacted
from ._state import ModelFallback as ModelFallback
from ._state import QueryEvent as QueryEvent
from ._state import State as State
from ._state import TextDelta as TextDelta
from ._state import ThinkingDelta as ThinkingDelta
from ._state import Transition as Transition
from ._state import TransitionReason as TransitionReason
from ._state import TurnEnd as TurnEnd
from ._state import TurnEndReason as TurnEndReason
from ._stream import StreamEvent as StreamEvent
from ._stream import StreamItem as StreamItem
from ._stream import StreamResult as StreamResult
from ._stream import StreamStatistics as StreamStatistics
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
    "TranscriptError",
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
    "tool",
]
