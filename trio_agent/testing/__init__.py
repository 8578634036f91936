"""Testing helpers for trio_agent and for users' own tools.

The executor harness: :class:`ToolScenario` values (and the :func:`scenarios`
hypothesis strategy, which needs the ``testing`` extra), the pure
:func:`reference_schedule`, :func:`run_scenario` (the real executor in virtual
time) and :func:`check_trace`.
"""

from ._reference import CallOutcome as CallOutcome
from ._reference import Schedule as Schedule
from ._reference import reference_schedule as reference_schedule
from ._scenario import ScenarioCall as ScenarioCall
from ._scenario import ScenarioError as ScenarioError
from ._scenario import ToolScenario as ToolScenario
from ._scenario import scenarios as scenarios
from ._trace import InvariantViolation as InvariantViolation
from ._trace import Trace as Trace
from ._trace import TraceEvent as TraceEvent
from ._trace import check_trace as check_trace
from ._trace import result_kind as result_kind
from ._trace import run_scenario as run_scenario

__all__ = [
    "CallOutcome",
    "InvariantViolation",
    "ScenarioCall",
    "ScenarioError",
    "Schedule",
    "ToolScenario",
    "Trace",
    "TraceEvent",
    "check_trace",
    "reference_schedule",
    "result_kind",
    "run_scenario",
    "scenarios",
]
