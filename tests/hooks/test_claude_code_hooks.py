"""Claude Code's command hooks run by the real ``trio-agent run`` (issue 28): hook
scripts written for Claude Code (``.claude/settings.json``, the event's JSON on
stdin, exit code 2 or JSON on stdout) block an ``rm -rf``, format a file after
Write, add context to the prompt and keep the turn going at Stop; real
subprocesses, real files, a scripted server on a loopback socket."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import trio

from trio_agent import Hooks, TextBlock, ToolCall, ToolResult, ToolUseBlock, UserMessage
from trio_agent._cli._hooks import claude_code_hooks
from trio_agent.testing import ScriptedAnswer, ScriptedModel, process_exited, serve_scripted_model

PY = shlex.quote(sys.executable)

#: A PreToolUse guard as Claude Code's docs write them: exit 2 blocks, stderr says why.
NO_RM = """\
import json, sys
event = json.load(sys.stdin)
with open("hook-log.jsonl", "a") as log:
    log.write(json.dumps(event) + "\\n")
if "rm -rf" in event["tool_input"].get("command", ""):
    print("Blocked: rm -rf is not allowed here", file=sys.stderr)
    sys.exit(2)
"""

#: A PostToolUse formatter: rewrites the file the Write made, says so in JSON.
FORMAT = """\
import json, sys
event = json.load(sys.stdin)
path = event["tool_input"]["file_path"]
with open(path) as f:
    text = f.read()
with open(path, "w") as f:
    f.write(text.strip().upper() + "\\n")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                          "additionalContext": "formatted " + path}}))
"""

#: A UserPromptSubmit hook: plain stdout is context for the model.
CONTEXT = """\
import json, sys
event = json.load(sys.stdin)
print("Context: the prompt was " + repr(event["prompt"]) + "; the branch is main.")
"""

#: A Stop hook: refuses the first end of the turn with JSON, lets the second go.
STOP = """\
import json, sys
event = json.load(sys.stdin)
if not event["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "Run the tests before you stop."}))
"""


def settings(tmp_path: Path) -> None:
    hooks = tmp_path / ".claude" / "hooks"
    hooks.mkdir(parents=True)
    for name, script in [("no_rm", NO_RM), ("fmt", FORMAT), ("ctx", CONTEXT), ("stop", STOP)]:
        (hooks / f"{name}.py").write_text(script)

    def command(name: str) -> list[dict[str, Any]]:
        line = f'{PY} "$CLAUDE_PROJECT_DIR/.claude/hooks/{name}.py"'
        return [{"type": "command", "command": line, "timeout": 30}]

    config = {
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": command("no_rm")}],
            "PostToolUse": [{"matcher": "Write|Edit", "hooks": command("fmt")}],
            "UserPromptSubmit": [{"hooks": command("ctx")}],
            "Stop": [{"hooks": command("stop")}],
        }
    }
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(config))


def cli_env(**extra: str) -> dict[str, str]:
    """The command's environment: no real key, no debug."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TRIO_AGENT"))}
    return env | {"PYTHONUNBUFFERED": "1", "ANTHROPIC_API_KEY": "sk-test"} | extra


async def test_claude_code_hook_scripts_run_unchanged(tmp_path: Path) -> None:
    settings(tmp_path)
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("precious\n")
    model = ScriptedModel(
        [
            ScriptedAnswer(
                blocks=[
                    ToolUseBlock("toolu_rm", "Bash", {"command": "rm -rf victim"}),
                    ToolUseBlock(
                        "toolu_w", "Write", {"file_path": "notes.txt", "content": "  hello  "}
                    ),
                ]
            ),
            ScriptedAnswer(blocks=[TextBlock("Done.")]),
            ScriptedAnswer(blocks=[TextBlock("Tests pass. Done.")]),
        ]
    )
    home = tmp_path / "home"
    home.mkdir()
    async with serve_scripted_model(model) as url:
        args = ["run", "tidy up", "--json", "--base-url", url, "--workspace", str(tmp_path)]
        run = await trio.run_process(
            [
                sys.executable,
                "-m",
                "trio_agent._cli",
                *args,
                "--allow",
                "Bash,Write",
                "--project-hooks",
            ],
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=cli_env(HOME=str(home)),
            cwd=str(tmp_path),
        )
    assert run.returncode == 0, run.stderr.decode()
    # the guard blocked the rm: nothing was deleted, the model read why
    assert (tmp_path / "victim" / "keep.txt").read_text() == "precious\n"
    records = [json.loads(line) for line in run.stdout.decode().splitlines()]
    results = {r["tool_use_id"]: r for r in records if r["type"] == "ToolResult"}
    assert results["toolu_rm"]["content"] == "Blocked: rm -rf is not allowed here"
    assert results["toolu_rm"]["is_error"] is True
    # the formatter ran after Write and its context reached the model
    assert (tmp_path / "notes.txt").read_text() == "HELLO\n"
    assert "formatted notes.txt" in results["toolu_w"]["content"]
    # the prompt's context went with the first request
    first = json.dumps(model.requests[0].body["messages"])
    assert "Context: the prompt was 'tidy up'; the branch is main." in first
    # the Stop hook kept the turn going once
    assert len(model.requests) == 3
    assert "Run the tests before you stop." in json.dumps(model.requests[2].body["messages"][-1])
    # the hook got Claude Code's fields on stdin
    (event,) = [json.loads(line) for line in (tmp_path / "hook-log.jsonl").read_text().splitlines()]
    assert event["hook_event_name"] == "PreToolUse"
    assert event["tool_name"] == "Bash"
    assert event["tool_input"] == {"command": "rm -rf victim"}
    assert event["tool_use_id"] == "toolu_rm"
    assert event["cwd"] == str(tmp_path)
    assert event["session_id"]


async def test_a_projects_hooks_run_only_when_trusted(tmp_path: Path) -> None:
    # A cloned repository's .claude/settings.json is shell commands: the CLI runs them
    # only with --project-hooks (and says so); the user's own hooks always run.
    workspace, home = tmp_path / "repo", tmp_path / "home"
    for root, name in [(workspace, "project"), (home, "user")]:
        line = f"{PY} -c \"open('{tmp_path / name}.ran', 'w').close()\""
        write_settings(root, {"PreToolUse": [{"hooks": [{"type": "command", "command": line}]}]})
    for trusted in (False, True):
        model = ScriptedModel(
            [
                ScriptedAnswer(blocks=[ToolUseBlock("toolu_1", "Bash", {"command": "true"})]),
                ScriptedAnswer(blocks=[TextBlock("Done.")]),
            ]
        )
        async with serve_scripted_model(model) as url:
            args = ["run", "go", "--json", "--base-url", url, "--workspace", str(workspace)]
            args += ["--allow", "Bash"] + (["--project-hooks"] if trusted else [])
            run = await trio.run_process(
                [sys.executable, "-m", "trio_agent._cli", *args],
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=cli_env(HOME=str(home)),
                cwd=str(workspace),
            )
        assert run.returncode == 0, run.stderr.decode()
        assert len(model.requests) == 2  # the tool call ran and was answered
        assert (tmp_path / "user.ran").exists()
        assert (tmp_path / "project.ran").exists() is trusted
        hint = "not running the hooks in .claude/settings.json"
        assert (hint in run.stderr.decode()) is not trusted, run.stderr.decode()
        (tmp_path / "user.ran").unlink()


# -- the mapping itself, with real processes ------------------------------------------


def write_settings(root: Path, hooks: dict[str, Any]) -> None:
    (root / ".claude").mkdir(parents=True, exist_ok=True)
    (root / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))


def script_hook(root: Path, name: str, body: str, **extra: Any) -> list[dict[str, Any]]:
    (root / f"{name}.py").write_text(body)
    return [{"type": "command", "command": f"{PY} {shlex.quote(str(root / name))}.py", **extra}]


async def call_of(hooks: Hooks, name: str, input: dict[str, Any]) -> Any:
    from trio_agent import ToolContext, tool

    @tool
    async def Bash(command: str) -> str:
        """Run."""
        return ""

    assert Bash.name == "Bash"
    assert hooks.pre_tool_use is not None
    return await hooks.pre_tool_use(ToolCall(Bash, input, ToolContext("t1", name)))


async def test_permission_decisions_and_updated_input(tmp_path: Path) -> None:
    body = """\
import json, sys
event = json.load(sys.stdin)
command = event["tool_input"]["command"]
if command == "ask":
    decision = {"permissionDecision": "ask", "permissionDecisionReason": "check with a human"}
elif command == "deny":
    decision = {"permissionDecision": "deny", "permissionDecisionReason": "not today"}
elif command == "crash":
    sys.exit(1)
else:
    decision = {"permissionDecision": "allow", "updatedInput": {"command": command + " -n"}}
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", **decision}}))
"""
    write_settings(
        tmp_path, {"PreToolUse": [{"matcher": "*", "hooks": script_hook(tmp_path, "pre", body)}]}
    )
    hooks = claude_code_hooks(str(tmp_path), home=str(tmp_path / "nohome"))
    assert hooks is not None
    assert hooks.post_tool_use is None
    from trio_agent import Ask, Deny

    assert await call_of(hooks, "Bash", {"command": "ask"}) == Ask("check with a human")
    assert await call_of(hooks, "Bash", {"command": "deny"}) == Deny("not today")
    assert await call_of(hooks, "Bash", {"command": "ls"}) == {"command": "ls -n"}
    # a non-blocking error (exit 1): the call goes on
    assert await call_of(hooks, "Bash", {"command": "crash"}) is None


async def test_a_slow_hook_is_killed_at_its_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    body = (
        f"import os, signal\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\nsignal.pause()\n"
    )
    (tmp_path / "slow.py").write_text(body)
    # two commands: the shell forks the script (and waits), so killing the shell alone
    # would leave the script running
    command = f"true; {PY} {shlex.quote(str(tmp_path / 'slow.py'))}; true"
    hook = [{"type": "command", "command": command, "timeout": 0.5}]
    write_settings(tmp_path, {"UserPromptSubmit": [{"hooks": hook}]})
    hooks = claude_code_hooks(str(tmp_path), home=str(tmp_path / "nohome"))
    assert hooks is not None
    assert hooks.user_prompt_submit is not None
    assert await hooks.user_prompt_submit(UserMessage("hi")) is None  # a non-blocking error
    # the command ran, and was killed at its timeout: the script, the shell's child,
    # too (it may linger as a zombie of init's for a moment, so wait on its pidfd)
    pid = int(pid_file.read_text())
    assert process_exited(pid, timeout=10), "the hook's script outlived its timeout"


async def test_post_tool_use_exit_2_is_feedback_for_the_model(tmp_path: Path) -> None:
    body = "import sys\nprint('lint: 2 warnings', file=sys.stderr)\nsys.exit(2)\n"
    write_settings(tmp_path, {"PostToolUse": [{"hooks": script_hook(tmp_path, "lint", body)}]})
    hooks = claude_code_hooks(str(tmp_path), home=str(tmp_path / "nohome"))
    assert hooks is not None
    assert hooks.post_tool_use is not None
    from trio_agent import ToolContext, tool

    @tool
    async def Edit(file_path: str) -> str:
        """Edit."""
        return ""

    call = ToolCall(Edit, {"file_path": "a.py"}, ToolContext("t1", "Edit"))
    out = await hooks.post_tool_use(call, ToolResult("t1", "edited a.py"))
    assert out.content == "edited a.py\n\nlint: 2 warnings"
    assert out.is_error is False


def test_no_settings_no_hooks(tmp_path: Path) -> None:
    assert claude_code_hooks(str(tmp_path), home=str(tmp_path)) is None
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text("{not json")
    assert claude_code_hooks(str(tmp_path), home=str(tmp_path / "x")) is None


async def test_exit_2_blocks_a_prompt_and_the_end_of_a_turn(tmp_path: Path) -> None:
    block = "import sys\nprint('not now', file=sys.stderr)\nsys.exit(2)\n"
    log = (
        "import json, sys\nevent = json.load(sys.stdin)\n"
        f"open({str(tmp_path / 'events.jsonl')!r}, 'a').write(json.dumps(event) + '\\n')\n"
    )
    write_settings(
        tmp_path,
        {
            "UserPromptSubmit": [{"hooks": script_hook(tmp_path, "block", block)}],
            "Stop": [{"hooks": script_hook(tmp_path, "block2", block)}],
            "SubagentStop": [{"hooks": script_hook(tmp_path, "log", log)}],
            "PreCompact": [{"hooks": script_hook(tmp_path, "log2", log)}],
        },
    )
    hooks = claude_code_hooks(
        str(tmp_path), home=str(tmp_path / "nohome"), transcript_path="t.jsonl"
    )
    assert hooks is not None
    assert hooks.user_prompt_submit is not None
    assert hooks.stop is not None
    assert hooks.subagent_stop is not None
    assert hooks.pre_compact is not None
    from trio_agent import Deny, StopHookResult

    assert await hooks.user_prompt_submit(UserMessage("hi")) == Deny("not now")
    assert await hooks.stop((), stop_hook_active=False) == StopHookResult(
        block=True, message="not now"
    )
    assert await hooks.subagent_stop("researcher", (), stop_hook_active=True) is None
    await hooks.pre_compact(())
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["hook_event_name"] for e in events] == ["SubagentStop", "PreCompact"]
    assert events[0]["stop_hook_active"] is True
    assert events[0]["agent_type"] == "researcher"
    assert events[0]["transcript_path"] == "t.jsonl"
    assert events[1]["trigger"] == "auto"


async def test_matchers_select_the_tools(tmp_path: Path) -> None:
    deny = 'import json\nprint(json.dumps({"decision": "block", "reason": "no edits"}))\n'
    write_settings(
        tmp_path,
        {"PreToolUse": [{"matcher": "Edit|Write", "hooks": script_hook(tmp_path, "d", deny)}]},
    )
    hooks = claude_code_hooks(str(tmp_path), home=str(tmp_path / "nohome"))
    assert hooks is not None
    from trio_agent import Deny

    assert await call_of(hooks, "Bash", {"command": "ls"}) is None  # not matched: not run
    from trio_agent import ToolContext, tool

    @tool
    async def Write(file_path: str) -> str:
        """Write."""
        return ""

    assert hooks.pre_tool_use is not None
    call = ToolCall(Write, {"file_path": "a"}, ToolContext("t1", "Write"))
    assert await hooks.pre_tool_use(call) == Deny("no edits")
