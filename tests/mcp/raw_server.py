"""A raw JSON-RPC MCP server over stdio that misbehaves on purpose, for the MCP tests.

Written without the SDK so that it can break the protocol: ``python raw_server.py
SPEC`` where SPEC is a JSON object (or ``@path`` of a file that holds one)::

    {"tools": [...],          # the tools/list entries (default: one tool "t")
     "call": "MODE", ...}     # what tools/call does, with the MODE's own keys

Modes: ``"text"`` (``"texts"``: the text items of the result), ``"huge"`` (``"size"``
characters of text in one item), ``"items"`` (``"count"`` text items),
``"progress"`` / ``"logs"`` (``"count"`` notifications, then a result),
``"raw"`` (``"line"``: the bytes of the answer, latin-1 in the JSON, ``{id}`` filled in),
``"orphan"`` (start ``sleep`` holding our stdout, write its pid to ``"pidfile"``, die),
``"spawn"`` (start ``sleep`` in the background, write its pid, answer; exit on EOF).
Not a test module: nothing here is collected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

OUT = sys.stdout.buffer


def send(message: dict[str, Any]) -> None:
    OUT.write(json.dumps(message).encode() + b"\n")
    OUT.flush()


def result(id: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": id, "result": value})


def texts(items: list[str]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t} for t in items]}


def call(spec: dict[str, Any], id: Any, params: dict[str, Any]) -> None:
    mode = spec.get("call", "text")
    token = params.get("_meta", {}).get("progressToken")
    if mode == "text":
        result(id, texts(spec.get("texts", ["ok"])))
    elif mode == "huge":
        # Written in pieces: the line is never whole in this process's memory twice.
        size = int(spec["size"])
        OUT.write(json.dumps({"jsonrpc": "2.0", "id": id}).encode()[:-1])
        OUT.write(b', "result": {"content": [{"type": "text", "text": "')
        piece = b"x" * (1 << 20)
        for _ in range(size >> 20):
            OUT.write(piece)
        OUT.write(b"x" * (size & ((1 << 20) - 1)) + b'"}]}}\n')
        OUT.flush()
    elif mode == "items":
        result(id, texts(["i"] * int(spec["count"])))
    elif mode in ("progress", "logs"):
        for i in range(int(spec["count"])):
            if mode == "progress":
                note = {"progressToken": token, "progress": i, "message": f"p{i}"}
                message = {"jsonrpc": "2.0", "method": "notifications/progress", "params": note}
            else:
                note = {"level": "info", "data": f"log {i}"}
                message = {"jsonrpc": "2.0", "method": "notifications/message", "params": note}
            OUT.write(json.dumps(message).encode() + b"\n")
        result(id, texts(["done"]))
    elif mode == "raw":
        OUT.write(spec["line"].replace("{id}", json.dumps(id)).encode("latin-1") + b"\n")
        OUT.flush()
    elif mode == "orphan":
        child = subprocess.Popen(["sleep", "3600"], stdout=OUT, stdin=subprocess.DEVNULL)
        with open(spec["pidfile"], "w") as f:
            f.write(str(child.pid))
        os._exit(1)
    elif mode == "spawn":
        child = subprocess.Popen(["sleep", "3600"], stdout=subprocess.DEVNULL)
        with open(spec["pidfile"], "w") as f:
            f.write(str(child.pid))
        result(id, texts(["spawned"]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


def main() -> None:
    arg = sys.argv[1]
    spec = json.loads(Path(arg[1:]).read_text() if arg.startswith("@") else arg)
    tools = spec.get("tools", [{"name": "t", "inputSchema": {"type": "object"}}])
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, id = message.get("method"), message.get("id")
        if id is None:
            continue  # a notification (initialized, cancelled)
        if method == "initialize":
            result(
                id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "raw", "version": "0"},
                },
            )
        elif method == "tools/list":
            result(id, {"tools": tools})
        elif method == "tools/call":
            call(spec, id, message.get("params", {}))
        else:
            result(id, {})


if __name__ == "__main__":
    main()
