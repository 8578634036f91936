"""A streamable-HTTP MCP server that misbehaves on purpose, for the audit tests.

``python hostile_http_server.py MODE [COUNT]`` prints its port. ``tools/call`` of
tool ``t``: ``"hang"`` never answers a call whose arguments say ``{"hang": true}``
(and prints ``hung`` once it has it) and answers any other at once; ``"items"``
answers with COUNT text items; ``"huge"`` with one text of COUNT bytes;
``"progress"`` streams COUNT progress notifications (SSE), then the answer;
anything else answers ``ok``. Not a test module: nothing here is collected.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODE = sys.argv[1]
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def body(self, code: int, data: bytes, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in extra:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.body(405, b"")

    def do_DELETE(self) -> None:
        self.body(200, b"")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if "id" not in message or "method" not in message:
            self.body(202, b"")
            return
        id, method = message["id"], message["method"]

        def ok(result: Any) -> bytes:
            return json.dumps({"jsonrpc": "2.0", "id": id, "result": result}).encode()

        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "hostile", "version": "0"},
            }
            self.body(200, ok(result), (("Mcp-Session-Id", "abc"),))
        elif method == "tools/list":
            self.body(200, ok({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}))
        elif method == "tools/call":
            self.call(message.get("params", {}), ok)
        else:
            self.body(200, ok({}))

    def call(self, params: dict[str, Any], ok: Any) -> None:
        token = (params.get("_meta") or {}).get("progressToken")
        if MODE == "hang" and (params.get("arguments") or {}).get("hang"):
            print("hung", flush=True)
            threading.Event().wait()  # hangs until the process is killed
        elif MODE == "items":
            self.body(200, ok({"content": [{"type": "text", "text": "i"}] * COUNT}))
        elif MODE == "huge":
            head, tail = ok({"content": [{"type": "text", "text": "@"}]}).split(b"@")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(head) + COUNT + len(tail)))
            self.end_headers()
            self.wfile.write(head)
            for _ in range(COUNT >> 20):
                self.wfile.write(b"x" * (1 << 20))
            self.wfile.write(b"x" * (COUNT & ((1 << 20) - 1)) + tail)
        elif MODE == "progress":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(COUNT):
                note = {"progressToken": token, "progress": i}
                data = {"jsonrpc": "2.0", "method": "notifications/progress", "params": note}
                self.wfile.write(b"event: message\ndata: " + json.dumps(data).encode() + b"\n\n")
            done = ok({"content": [{"type": "text", "text": "done"}]})
            self.wfile.write(b"event: message\ndata: " + done + b"\n\n")
            self.wfile.flush()
            self.close_connection = True
        else:
            self.body(200, ok({"content": [{"type": "text", "text": "ok"}]}))


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
