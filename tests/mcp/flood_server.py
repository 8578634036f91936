"""A raw JSON-RPC MCP server over stdio that floods on purpose, for the audit tests.

``python flood_server.py MODE COUNT``; on ``tools/call`` it writes COUNT messages of
MODE and then the call's answer: ``"log_bypass"`` log messages with an answer to a
request never sent after every 500th, ``"notes"`` ``notifications/resources/updated``,
``"pings"`` ``ping`` requests (read nothing until the answer is written: the client's
answers to them pile up). Not a test module: nothing here is collected.
"""

from __future__ import annotations

import json
import sys
from typing import Any

OUT = sys.stdout.buffer


def send(message: dict[str, Any]) -> None:
    OUT.write(json.dumps(message).encode() + b"\n")
    OUT.flush()


def flood(mode: str, count: int, id: Any) -> None:
    for i in range(count):
        if mode == "log_bypass":
            note = {"level": "info", "data": f"log {i}"}
            OUT.write(
                json.dumps(
                    {"jsonrpc": "2.0", "method": "notifications/message", "params": note}
                ).encode()
                + b"\n"
            )
            if i % 500 == 0:
                OUT.write(
                    json.dumps({"jsonrpc": "2.0", "id": 987654 + i, "result": {}}).encode() + b"\n"
                )
        elif mode == "notes":
            note = {"uri": "file:///x"}
            message = {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": note,
            }
            OUT.write(json.dumps(message).encode() + b"\n")
        elif mode == "pings":
            OUT.write(
                json.dumps({"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"}).encode() + b"\n"
            )
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "done"}]}})


def main() -> None:
    mode, count = sys.argv[1], int(sys.argv[2])
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, id = message.get("method"), message.get("id")
        if id is None or method is None:
            continue  # a notification, or an answer to one of our pings
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            info = {"name": "flood", "version": "0"}
            caps = {"tools": {}, "logging": {}}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": id,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": caps,
                        "serverInfo": info,
                    },
                }
            )
        elif method == "tools/list":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": id,
                    "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]},
                }
            )
        elif method == "tools/call":
            flood(mode, count, id)
        else:
            send({"jsonrpc": "2.0", "id": id, "result": {}})


if __name__ == "__main__":
    main()
