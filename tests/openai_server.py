"""A local OpenAI-compatible chat-completions server for tests (real HTTP on 127.0.0.1).

Behaviour is scripted per request with ``server.plan``: a list consumed in order, each
item one of "ok", "429", "500", "timeout", "malformed", "wrong_count", "truncated",
"echo_key" (a 400 whose error message repeats the request's Authorization header),
or a callable(body) -> str giving the message content. When the plan is empty, "ok".
``fail_ids``: substrings of problems that always get a 500 (a persistent fault).
``port``: 0 = any free port; a fixed one lets a second server stand in at the same URL
(two teammates configured with one endpoint).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self, n_hints: int = 5, content=None, port: int = 0):
        self.n_hints = n_hints
        self.content = content  # callable(body) -> str, for "ok" answers
        self.plan: list = []
        self.fail_ids: list[str] = []
        self.requests: list[dict] = []
        self.auth_headers: list[str] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        # A client that times out closes the socket mid-answer: expected here, not an error.
        self.httpd.handle_error = lambda request, client_address: None
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    def default_content(self, body) -> str:
        text = body["messages"][-1]["content"]
        tag = abs(hash(text)) % 1000
        return "\n".join(f"{i}. **Technique {tag}-{i}**" for i in range(1, self.n_hints + 1))

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _send(self, code, payload, headers=None):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    server.auth_headers.append(self.headers.get("Authorization", ""))
                    action = server.plan.pop(0) if server.plan else "ok"
                text = body["messages"][-1]["content"]
                if any(s in text for s in server.fail_ids):
                    action = "500"
                if action == "429":
                    return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0.05"})
                if action == "echo_key":
                    auth = self.headers.get("Authorization", "")
                    return self._send(400, {"error": {"message": f"bad request from {auth}"}})
                if action == "500":
                    return self._send(500, {"error": {"message": "boom"}})
                if action == "timeout":
                    time.sleep(1.5)
                if action == "malformed":
                    return self._send(200, b"{not json")
                if action == "truncated":
                    return self._send(200, {"id": "x", "object": "chat.completion", "choices": []})
                if callable(action):
                    content = action(body)
                elif action == "wrong_count":
                    content = "1. only one hint"
                else:
                    content = (server.content or server.default_content)(body)
                return self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
                })

        return Handler
