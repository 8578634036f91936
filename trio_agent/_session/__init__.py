"""Layer 4, the session: a conversation's history, its JSONL transcript, usage
and cost totals, interrupt and abort (:class:`Session`), and a turn's timeline
(:class:`TurnRecorder`: the CLI's and the transcript's ``timeline`` lines)."""

from ._run import RunResult as RunResult
from ._run import run as run
from ._session import Session as Session
from ._session import estimate_cost as estimate_cost
from ._store import check_session_id as check_session_id
from ._timeline import ModelCall as ModelCall
from ._timeline import ToolRow as ToolRow
from ._timeline import ToolState as ToolState
from ._timeline import TurnRecorder as TurnRecorder
from ._timeline import instrument as instrument
from ._timeline import printable as printable
from ._transcript import Transcript as Transcript
from ._transcript import TranscriptWriter as TranscriptWriter
from ._transcript import read_transcript as read_transcript
from ._transcript import repair_history as repair_history
