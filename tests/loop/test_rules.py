from collections.abc import Mapping
from typing import Any

import pytest
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from trio_agent import Allow, Deny, PermissionRules, Reject, Tool, ToolContext
from trio_agent._loop._rules import PermissionRuleError, Rule, RuleAction, main_argument


async def _noop(input: Mapping[str, Any], ctx: ToolContext) -> str:
    return ""


def make_tool(name: str) -> Tool:
    return Tool(name, f"the {name} tool", {"type": "object"}, _noop)


CTX = ToolContext("toolu_1", "X")


@pytest.mark.parametrize(
    ("text", "tool", "pattern"),
    [
        ("Read", "Read", None),
        ("Bash(git *)", "Bash", "git *"),
        ("  Write(src/*.py) ", "Write", "src/*.py"),
        ("Bash(echo (a))", "Bash", "echo (a)"),
        ("mcp__x-y_1", "mcp__x-y_1", None),
    ],
)
def test_parse(text: str, tool: str, pattern: str | None) -> None:
    rule = Rule.parse(text)
    assert (rule.tool, rule.pattern) == (tool, pattern)
    assert Rule.parse(str(rule)) == rule


@pytest.mark.parametrize("text", ["", "Bash(", "Bash()", "Ba sh", "Bash(x)y", "(x)", "a" * 129])
def test_parse_rejects_malformed(text: str) -> None:
    with pytest.raises(PermissionRuleError, match="rule"):
        Rule.parse(text)


def test_bad_rule_lists_are_typed_errors() -> None:
    with pytest.raises(PermissionRuleError):
        PermissionRules(allow="Read")  # type: ignore[arg-type]
    with pytest.raises(PermissionRuleError):
        PermissionRules(allow=[3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="invalid permission rule"):
        PermissionRules(deny=["Bash("])


def test_main_argument_order() -> None:
    assert main_argument({"path": "a", "command": "b"}) == "a"
    assert main_argument({"file_path": "f", "url": "u"}) == "f"
    assert main_argument({"command": "ls", "pattern": "p"}) == "ls"
    assert main_argument({"url": "https://x", "pattern": "p"}) == "https://x"
    assert main_argument({"pattern": "TODO"}) == "TODO"
    assert main_argument({"path": 3, "pattern": "TODO"}) == "TODO"
    assert main_argument({"other": "x"}) is None


def test_pattern_matching() -> None:
    rule = Rule.parse("Bash(git *)")
    assert rule.matches("Bash", {"command": "git status"})
    assert not rule.matches("Bash", {"command": "rm -rf /"})
    assert not rule.matches("Bash", {})  # no main argument: a pattern rule never matches
    assert not rule.matches("Read", {"command": "git status"})
    assert Rule.parse("Write(src/*)").matches("Write", {"path": "src/a/b.py"})  # * spans /
    assert not Rule.parse("Write(SRC/*)").matches("Write", {"path": "src/a"})  # case-sensitive
    assert Rule.parse("Read").matches("Read", {})


def test_precedence_deny_then_ask_then_allow() -> None:
    rules = PermissionRules(
        allow=["Bash", "Read"],
        ask=["Bash(git push*)", "Read(secrets/*)"],
        deny=["Bash(git push --force*)", "Read"],
    )
    assert rules.decide("Bash", {"command": "ls"}) == (RuleAction.ALLOW, Rule("Bash"))
    assert rules.decide("Bash", {"command": "git push"})[0] is RuleAction.ASK
    assert rules.decide("Bash", {"command": "git push --force"})[0] is RuleAction.DENY
    # deny wins even over a more specific ask or allow rule
    assert rules.decide("Read", {"path": "secrets/k"})[0] is RuleAction.DENY
    # no rule: ask
    assert rules.decide("Write", {"path": "x"}) == (RuleAction.ASK, None)


async def test_call_without_callback() -> None:
    rules = PermissionRules(allow=["Read"], deny=["Bash"])
    with trio.testing.assert_checkpoints():
        assert await rules(make_tool("Read"), {}, CTX) == Allow()
    with trio.testing.assert_checkpoints():
        decision = await rules(make_tool("Bash"), {"command": "ls"}, CTX)
    assert isinstance(decision, Deny)
    assert "'Bash'" in decision.message
    with trio.testing.assert_checkpoints():
        decision = await rules(make_tool("Write"), {}, CTX)
    assert isinstance(decision, Deny)
    assert "no one to ask" in decision.message


async def test_ask_callback_decides(autojump_clock: trio.testing.MockClock) -> None:
    asked: list[tuple[str, Mapping[str, Any]]] = []
    answers = iter([Allow({"path": "b"}), Reject("no"), Deny("not now")])

    async def ask(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Allow | Deny | Reject:
        asked.append((tool.name, input))
        await trio.sleep(1)  # a human thinking
        return next(answers)

    rules = PermissionRules(allow=["Read"], ask=["Write"], ask_callback=ask)
    assert await rules(make_tool("Write"), {"path": "a"}, CTX) == Allow({"path": "b"})
    assert await rules(make_tool("Bash"), {"command": "ls"}, CTX) == Reject("no")
    assert await rules(make_tool("Write"), {"path": "c"}, CTX) == Deny("not now")
    assert await rules(make_tool("Read"), {"path": "c"}, CTX) == Allow()
    assert asked == [
        ("Write", {"path": "a"}),
        ("Bash", {"command": "ls"}),
        ("Write", {"path": "c"}),
    ]


async def test_default_rules() -> None:
    rules = PermissionRules.default()
    for name in ("Read", "Glob", "Grep", "WebFetch"):
        assert rules.decide(name, {})[0] is RuleAction.ALLOW
        assert await rules(make_tool(name), {}, CTX) == Allow()
    for name in ("Write", "Edit", "Bash"):
        assert rules.decide(name, {})[0] is RuleAction.ASK
        assert isinstance(await rules(make_tool(name), {}, CTX), Deny)

    async def yes(tool: Tool, input: Mapping[str, Any], ctx: ToolContext) -> Allow:
        return Allow()

    assert await PermissionRules.default(yes)(make_tool("Bash"), {}, CTX) == Allow()


names = st.sampled_from(["Read", "Bash", "Write"])
args = st.sampled_from(["a", "ab", "b/c", "git x"])
rule_texts = st.one_of(
    names, st.builds(lambda n, p: f"{n}({p})", names, st.sampled_from(["a*", "*", "b/*", "git *"]))
)


@given(
    allow=st.lists(rule_texts, max_size=4),
    ask=st.lists(rule_texts, max_size=4),
    deny=st.lists(rule_texts, max_size=4),
    name=names,
    arg=args,
)
def test_precedence_matches_a_simple_model(
    allow: list[str], ask: list[str], deny: list[str], name: str, arg: str
) -> None:
    rules = PermissionRules(allow=allow, ask=ask, deny=deny)
    input = {"command": arg}

    def any_match(texts: list[str]) -> bool:
        for text in texts:
            tool, _, rest = text.partition("(")
            if tool == name and (not rest or simple_glob(arg, rest[:-1])):
                return True
        return False

    expected = (
        RuleAction.DENY
        if any_match(deny)
        else RuleAction.ASK
        if any_match(ask)
        else RuleAction.ALLOW
        if any_match(allow)
        else RuleAction.ASK
    )
    assert rules.decide(name, input)[0] is expected


def simple_glob(value: str, pattern: str) -> bool:
    # A tiny reference for the patterns used above.
    if pattern == "*":
        return True
    prefix = pattern.removesuffix("*")
    return value.startswith(prefix) if pattern.endswith("*") else value == pattern


def test_a_rule_naming_an_unknown_tool_warns_when_the_tools_are_known() -> None:
    from trio_agent._loop._rules import UnknownToolWarning

    with pytest.warns(UnknownToolWarning, match="Raed"):
        PermissionRules(allow=["Raed"], tools=[make_tool("Read"), "Bash"])
    rules = PermissionRules(allow=["Read", "Bash(ls *)"], tools=["Read", "Bash"])
    assert rules.tools == frozenset({"Read", "Bash"})
    PermissionRules(allow=["Anything"])  # tools not given: nothing to check against


def test_claude_code_prefix_rules() -> None:
    rules = PermissionRules(allow=["Bash(git diff:*)"], deny=["Bash(rm:*)"])
    assert rules.decide("Bash", {"command": "git diff"})[0] is RuleAction.ALLOW
    assert rules.decide("Bash", {"command": "git diff --stat"})[0] is RuleAction.ALLOW
    assert rules.decide("Bash", {"command": "git diffx"})[0] is RuleAction.ASK
    assert rules.decide("Bash", {"command": "rm"})[0] is RuleAction.DENY
    assert rules.decide("Bash", {"command": "ls; /bin/rm -f x"})[0] is RuleAction.DENY
    assert rules.decide("Bash", {"command": "rmdir x"})[0] is RuleAction.ASK
