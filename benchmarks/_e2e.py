"""End-to-end turns: the scripted model on a real loopback server (its own process),
real time, the same tools for every contestant.

Contestants: trio_agent (``trio_agent.query`` with the streaming executor),
after-stream sequential, after-stream parallel (both on trio_agent's own client, so
only the scheduling differs), the SDK's beta tool runner with and without
``run_tools_eagerly``, pydantic-ai, and the ideal (``reference_schedule`` on the
actual block-finish times of the trio_agent run it is paired with; see
:mod:`benchmarks._ideal`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from . import _peers
from ._config import Config
from ._guard import QUICK_SAMPLE_TIMEOUT, SAMPLE_TIMEOUT, sample
from ._ideal import ideal_turn, timeline
from ._report import Series
from ._resources import corpus, server_url
from ._scenarios import Scenario
from ._turns import Provider, QueryRun, run_after_stream, run_query

QUICK_SCALE = 0.15


def bench_scenario(
    scenario: Scenario, provider: Provider = "anthropic"
) -> Callable[[Config], list[Series]]:
    """The scenario's rows; with ``provider="openai-responses"`` trio_agent and the
    after-stream loops run on ``OpenAIClient`` against the same server speaking Responses
    streams, and the Anthropic-only peers (SDK tool runner, pydantic-ai) are left out."""
    openai = provider == "openai-responses"

    def run(config: Config) -> list[Series]:
        scale = QUICK_SCALE if config.quick else 1.0
        base = f"{server_url(config)}/s/{scenario.name}/{scale}"
        root = corpus(config)
        name = f"e2e.openai_responses.{scenario.name}" if openai else f"e2e.{scenario.name}"
        subject = "trio_agent"

        def row(contestant: str, skipped: str | None = None, vs: str | None = subject) -> Series:
            return Series(
                name,
                contestant,
                "turn wall time",
                "s",
                subject=None if contestant == vs else vs,
                skipped=skipped,
            )

        ours = row(subject)
        ideal = row("ideal")
        # The peers run every safe call at once: trio_agent also without its default
        # cap (Claude Code's 10), when the scenario has more calls than that.
        wide = scenario.wide_concurrency
        wide_name = f"trio_agent (max_tool_concurrency={wide})"
        ours_wide = row(wide_name, vs=wide_name) if wide else None
        ideal_wide = row(f"ideal (max_concurrency={wide})", vs=wide_name) if wide else None
        seq = row("after-stream sequential")
        par = row("after-stream parallel")
        sdk_missing = _peers.sdk_version()
        sdk = row("sdk tool_runner", sdk_missing)
        sdk_eager = row("sdk tool_runner eager", sdk_missing)
        pyd = row("pydantic-ai", _peers.pydantic_ai_missing())
        peers = [] if openai else [sdk, sdk_eager, pyd]
        last: QueryRun | None = None
        timeout = QUICK_SAMPLE_TIMEOUT if config.quick else SAMPLE_TIMEOUT
        if not config.quick:
            # Warm up once (imports, first connections), untimed.
            run_query(base, root, timeout=timeout, provider=provider)

        def ours_sample(wall: Series, best: Series, cap: int) -> QueryRun | None:
            runs: list[QueryRun] = []

            def one(timeout: float) -> float:
                runs.append(
                    run_query(
                        base, root, max_tool_concurrency=cap, timeout=timeout, provider=provider
                    )
                )
                return runs[-1].end

            if sample(wall, one, timeout) is None:
                return None
            best.samples.append(ideal_turn(runs[-1]))
            return runs[-1]

        def after_stream(parallel: bool, timeout: float) -> float:
            return run_after_stream(
                base, root, parallel=parallel, timeout=timeout, provider=provider
            )

        for _ in range(config.repeat):
            last = ours_sample(ours, ideal, 10) or last
            if ours_wide is not None and ideal_wide is not None and wide is not None:
                ours_sample(ours_wide, ideal_wide, wide)
            sample(seq, partial(after_stream, False), timeout)
            sample(par, partial(after_stream, True), timeout)
            if not openai and sdk_missing is None:
                sample(sdk, lambda t: _peers.sdk_turn(base, root, False, t), timeout)
                sample(sdk_eager, lambda t: _peers.sdk_turn(base, root, True, t), timeout)
            if not openai and pyd.skipped is None:
                sample(pyd, lambda t: _peers.pydantic_ai_turn(base, root, t), timeout)
        if last is not None:
            over = ", OpenAI Responses" if openai else ""
            config.timelines.append(
                timeline(f"{name}: {scenario.description} (trio_agent{over})", last)
            )
        if scenario.name == "bash_cascade":
            ours.note = (
                "trio_agent cancels the failing Bash's siblings (by design); the "
                "others run every call to the end"
            )
        extra = [s for s in (ours_wide, ideal_wide) if s is not None]
        return [ours, ideal, *extra, seq, par, *peers]

    return run
