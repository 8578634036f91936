"""Layer 2, the streaming tool executor: ``tool_use`` blocks in, results out.

This is the package's one face: the layers above import from here, never from
its private modules.
"""

from ._call import read_return as read_return
from ._executor import TOOL_TASK_PREFIX as TOOL_TASK_PREFIX
from ._executor import ToolExecutor as ToolExecutor
from ._executor import open_tool_executor as open_tool_executor
from ._executor import start_beside as start_beside
from ._executor import take_ready as take_ready
from ._results import AbortReason as AbortReason
from ._results import ExecutorStatistics as ExecutorStatistics
from ._results import ToolFinished as ToolFinished
from ._results import ToolProgress as ToolProgress
from ._results import ToolResult as ToolResult
from ._results import sendable_blocks as sendable_blocks
from ._results import summarize_call as summarize_call
from ._results import unsendable_message as unsendable_message

__all__ = [
    "TOOL_TASK_PREFIX",
    "AbortReason",
    "ExecutorStatistics",
    "ToolExecutor",
    "ToolFinished",
    "ToolProgress",
    "ToolResult",
    "open_tool_executor",
    "read_return",
    "sendable_blocks",
    "start_beside",
    "summarize_call",
    "take_ready",
    "unsendable_message",
]
