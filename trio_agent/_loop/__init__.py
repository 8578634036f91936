"""Layer 3, the loop: :func:`query` runs one user turn as a state machine.

Each model call streams into a fresh tool executor (:mod:`._model_call`); the
pure decisions between calls live in :mod:`._recovery` over the frozen
:class:`State` (:mod:`._state`); :class:`TurnControl` aborts or interrupts a turn
from outside; :class:`PermissionRules` is a ready-made ``can_use_tool``.
"""

from ._compact import summarizing_compactor as summarizing_compactor
from ._control import TurnControl as TurnControl
from ._output import PartialOutput as PartialOutput
from ._query import check_approvals as check_approvals
from ._query import check_options as check_options
from ._query import query as query
from ._rules import PermissionRuleError as PermissionRuleError
from ._rules import PermissionRules as PermissionRules
from ._rules import UnknownToolWarning as UnknownToolWarning
from ._state import AttemptDiscarded as AttemptDiscarded
from ._state import BlockFinished as BlockFinished
from ._state import CacheBust as CacheBust
from ._state import Compacted as Compacted
from ._state import ModelFallback as ModelFallback
from ._state import PendingApprovals as PendingApprovals
from ._state import QueryEvent as QueryEvent
from ._state import Stall as Stall
from ._state import State as State
from ._state import SubagentTurn as SubagentTurn
from ._state import TextDelta as TextDelta
from ._state import ThinkingDelta as ThinkingDelta
from ._state import Transition as Transition
from ._state import TransitionReason as TransitionReason
from ._state import TurnEnd as TurnEnd
from ._state import TurnEndReason as TurnEndReason
from ._tool_input import ToolInputDelta as ToolInputDelta
