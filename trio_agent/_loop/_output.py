"""A turn's typed output in the loop: the final-result tool, the answer's value, and
:class:`PartialOutput` events while it streams.

:class:`OutputTurn` is made once per ``query`` when ``options.output_type`` is set.
On the provider's structured output (*native*) the final answer's text is the
JSON; otherwise the model calls the final-result tool (:data:`OUTPUT_TOOL_NAME`),
which runs in the executor like any tool (other tools of the same answer run too):
it builds and validates its input, and answers "accepted" or the reason it was
refused. The loop (``_query._Loop._decide``) reads what was accepted and ends the
turn, or sends the reason back (transition ``output_retry``) up to
``options.output_retries`` times.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

import attrs
import jiter

from .._hooks import ToolCall
from .._messages import AssistantMessage, ToolResultBlock, ToolUseBlock, UserMessage
from .._model import StreamEvent
from .._options import TurnOptions
from .._output import (
    OUTPUT_TOOL_DESCRIPTION,
    OUTPUT_TOOL_NAME,
    InvalidOutput,
    OutputSpec,
    OutputValidator,
    run_validators,
)
from .._permissions import Allow, PermissionDecision
from .._tools import Tool, ToolContext, ToolOutput, plain_json
from ._tool_input import GROWTH, MIN_STEP, ToolInputDelta

__all__ = ["ACCEPTED", "OutputTurn", "PartialOutput", "PartialText"]

#: The final-result tool's answer to an accepted value.
ACCEPTED: Final = "The final result was accepted."
#: What the model reads when it ended without calling the final-result tool.
NO_FINAL_CALL: Final = (
    f"The turn must end with a call to the {OUTPUT_TOOL_NAME} tool, whose input is the"
    " final result; call it now."
)


@attrs.frozen
class PartialOutput:
    """The typed output parsed as far as it has streamed (for a UI).

    A partial view of the JSON (strings, arrays and objects cut where it stops),
    never validated nor built: ``TurnEnd.output`` is the value. Sent while the
    final answer's text streams (structured output) or the final-result tool's
    input does.

    Attributes:
        value: the JSON value so far (inside its ``{"result": ...}`` wrapper, when
            the output type is not an object's).
        model_call: the number of the model call in the turn (1 for the first).
        received: bytes of JSON received so far.
    """

    value: Any
    model_call: int
    received: int


@attrs.define(eq=False)
class PartialText:
    """The final answer's text as it streams, parsed partially (structured output).

    Parses are coalesced as :class:`~._tool_input.PartialInputs` does (linear work).
    """

    spec: OutputSpec
    model_call: int
    _data: bytearray = attrs.field(factory=bytearray, init=False)
    _parsed: int = attrs.field(default=0, init=False)

    def feed(self, event: StreamEvent) -> PartialOutput | None:
        text = event.text_delta
        if text is None:
            return None
        self._data += text.encode()
        size = len(self._data)
        if self._parsed and size - self._parsed < max(MIN_STEP, GROWTH * self._parsed):
            return None
        self._parsed = size
        return self._partial(bytes(self._data))

    def _partial(self, data: bytes) -> PartialOutput | None:
        start = data.lstrip()
        if start.startswith(b"```"):  # a fenced answer: the JSON starts on the next line
            start = start.partition(b"\n")[2]
        try:
            value = jiter.from_json(
                start, partial_mode="trailing-strings", cache_mode="none", allow_inf_nan=False
            )
        except ValueError:
            return None
        return PartialOutput(_unwrapped(self.spec, value), self.model_call, len(data))


def _unwrapped(spec: OutputSpec, value: Any) -> Any:
    if spec.wrapped and isinstance(value, dict):
        return cast("dict[str, Any]", value).get("result")
    return value


def refusal(reason: str) -> str:
    """The final-result tool's answer to a refused value."""
    return f"The final result was refused: {reason}"


def partial_from_tool(spec: OutputSpec, delta: ToolInputDelta, model_call: int) -> PartialOutput:
    """The :class:`PartialOutput` of the final-result tool's streaming input."""
    return PartialOutput(_unwrapped(spec, dict(delta.partial_input)), model_call, delta.received)


@attrs.define(eq=False)
class OutputTurn:
    """The typed output of one ``query``: the spec, its validators, and what the
    final-result tool accepted or refused.

    Attributes:
        spec: the output's schema and builder.
        validators: ``options.output_validators``.
        native: the provider's structured output is used (else the final tool).
        accepted: tool_use id -> the value the final-result tool accepted.
        refused: tool_use id -> why the final-result tool refused its input.
    """

    spec: OutputSpec
    validators: tuple[OutputValidator, ...]
    native: bool
    accepted: dict[str, Any] = attrs.field(factory=dict[str, Any])
    refused: dict[str, str] = attrs.field(factory=dict[str, str])

    def tool(self) -> Tool:
        """The final-result tool (for the tool path)."""
        return Tool(
            name=OUTPUT_TOOL_NAME,
            description=OUTPUT_TOOL_DESCRIPTION,
            input_schema=self.spec.request_schema,
            run=self._run,
            concurrency_safe=True,
        )

    async def _run(self, input: Mapping[str, Any], ctx: ToolContext) -> str | ToolOutput:
        reason = await self.check(input)
        if isinstance(reason, str):
            self.refused[ctx.tool_use_id] = reason
            return ToolOutput(refusal(reason), is_error=True)
        self.accepted[ctx.tool_use_id] = reason[0]
        return ACCEPTED

    def recall(self, message: AssistantMessage, results: UserMessage) -> UserMessage:
        """Take back what an earlier ``query`` accepted of *message*'s final-result
        calls (the turn paused for approvals after them): a call whose result in
        *results* is :data:`ACCEPTED` is accepted, its input built again (the
        validators accepted it then); the others' results say why they were refused.
        Returns *results*, with the answer of an accepted call that no longer builds
        (the output type changed meanwhile) turned into its refusal."""
        finals = {u.id: u for u in self.final_calls(message)}
        changed = False
        blocks: list[Any] = []
        for block in results.content:
            call = None
            if isinstance(block, ToolResultBlock) and block.content == ACCEPTED:
                call = None if block.is_error else finals.get(block.tool_use_id)
            if call is not None and call.id not in self.accepted:
                try:
                    self.accepted[call.id] = self.spec.build(plain_json(call.input))
                except InvalidOutput as exc:
                    self.refused[call.id] = str(exc)
                    block = ToolResultBlock(call.id, refusal(str(exc)), is_error=True)
                    changed = True
            blocks.append(block)
        return UserMessage(tuple(blocks)) if changed else results

    async def check(self, data: Any) -> str | tuple[Any]:
        """``(value,)`` when *data* builds a value every validator accepts, else
        the reason it was refused. A validator's own failure (not a refusal) is
        raised."""
        try:
            value = self.spec.build(data)
        except InvalidOutput as exc:
            return str(exc)
        rejected = await run_validators(self.validators, value)
        return rejected if rejected is not None else (value,)

    async def from_text(self, message: AssistantMessage) -> str | tuple[Any]:
        """The value of a final answer (structured output: its text is the JSON),
        or why it was refused."""
        try:
            value = self.spec.parse_text(message.text)
        except InvalidOutput as exc:
            return str(exc)
        rejected = await run_validators(self.validators, value)
        return rejected if rejected is not None else (value,)

    def exempt(self, options: TurnOptions, final: Tool) -> TurnOptions:
        """*options* for the executor: the *final* tool is the loop's own, so neither
        ``can_use_tool`` nor the tool hooks are asked about it."""
        ask, hooks = options.can_use_tool, options.hooks
        changes: dict[str, Any] = {}
        if ask is not None:

            async def can_use_tool(
                tool: Tool, input: Mapping[str, Any], ctx: ToolContext
            ) -> PermissionDecision:
                return Allow() if tool is final else await ask(tool, input, ctx)

            changes["can_use_tool"] = can_use_tool
        if hooks is not None and hooks.tool_hooks:
            changes["hooks"] = attrs.evolve(
                hooks,
                pre_tool_use=_skipping(hooks.pre_tool_use, final),
                post_tool_use=_skipping(hooks.post_tool_use, final),
                post_tool_failure=_skipping(hooks.post_tool_failure, final),
            )
        return attrs.evolve(options, **changes) if changes else options

    def final_calls(self, message: AssistantMessage) -> list[ToolUseBlock]:
        """*message*'s calls of the final-result tool."""
        return [u for u in message.tool_uses if u.name == OUTPUT_TOOL_NAME]


def _skipping(hook: Any, final: Tool) -> Any:
    """*hook*, not called for the *final* tool's calls."""
    if hook is None:
        return None

    async def skipping(call: ToolCall, *args: Any) -> Any:
        return None if call.tool is final else await hook(call, *args)

    return skipping
