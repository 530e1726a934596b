"""A real OpenAI-compatible HTTP server on 127.0.0.1 that can misbehave on purpose.

For tests of judgelab's own logic (caching, resuming, retries, rate limits, failure
reporting). Not a model: each reply comes from a script (`add`) or, once the script is
empty, from `reply(body)`. A reply is a dict:

    {"content": str | None}            a normal chat completion with this message content
    {"status": int, "text": str}       any status with this raw body
    {"headers": {...}}                 extra response headers (e.g. Retry-After)
    {"delay_s": float}                 sleep first (longer than the client timeout = a timeout)
    {"truncate": int}                  announce the full body, send only this many bytes, close
    {"tokens": int}                    completion tokens reported in `usage`

The helpers below build the faults judgelab must survive. The server can also *enforce* a
rate limit, like a real provider: more than `max_concurrency` requests in flight, or more
than `max_requests` accepted within `window_s`, is answered 429 with Retry-After.
Every request is recorded (`requests`: path, headers, body, time) whether or not accepted.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]
Script = Reply | Callable[[dict[str, Any]], Reply]


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: with more clients connecting at once than
    # that, the kernel holds the rest back for a few hundred ms (measured: 4 of 16 judge calls
    # arrived 0.6 s late), a test-server artefact no real endpoint has.
    request_queue_size = 128


def completion(content: str | None, tokens: int = 7) -> dict[str, Any]:
    """A chat.completion response body."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": tokens, "total_tokens": 11 + tokens},
    }


# --- faults ------------------------------------------------------------------------------


def ok(content: str, tokens: int = 7) -> Reply:
    return {"content": content, "tokens": tokens}


def http_error(status: int, message: str = "injected", retry_after: float | None = None) -> Reply:
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return {"status": status, "text": json.dumps({"error": {"message": message}}),
            "headers": headers}  # fmt: skip


def hang(seconds: float) -> Reply:
    """Answer only after `seconds`: a client with a shorter timeout sees a timeout."""
    return {"delay_s": seconds, "content": "too late"}


def malformed_json() -> Reply:
    """HTTP 200 whose body is not JSON at all."""
    return {"status": 200, "text": '{"id": "chatcmpl-x", "choices": [{"message": {"con'}


def truncated(content: str = '{"scores": []}') -> Reply:
    """A normal reply whose connection drops halfway through the body."""
    body = json.dumps(completion(content))
    return {"text": body, "truncate": len(body) // 2}


def empty() -> Reply:
    return {"content": ""}


class OpenAIServer:
    """`/v1/chat/completions` on 127.0.0.1; use as a context manager or call `close()`."""

    def __init__(
        self,
        reply: Callable[[dict[str, Any]], Reply] | None = None,
        *,
        max_concurrency: int | None = None,
        max_requests: int | None = None,
        window_s: float = 60.0,
        port: int = 0,
    ) -> None:
        self.reply = reply
        self.script: deque[Script] = deque()
        self.requests: list[dict[str, Any]] = []
        self.max_concurrency = max_concurrency
        self.max_requests = max_requests
        self.window_s = window_s
        self.rejected = 0  # 429s sent by the enforced limit
        self.max_in_flight = 0
        self._in_flight = 0
        self._accepted: deque[float] = deque()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: with Nagle's algorithm on, the client's
            # delayed ACK holds the second for ~40 ms on every keep-alive request.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) or b"{}"
                body = json.loads(raw)
                server.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                        "at": time.monotonic(),
                    }
                )
                refusal = server._admit()
                if refusal is not None:
                    self._send(refusal)
                    return
                try:
                    reply = server._next(body)
                    time.sleep(reply.get("delay_s", 0))
                finally:
                    server._done()  # before the reply leaves: the client may send at once
                self._send(reply)

            def _send(self, reply: Reply) -> None:
                if "text" in reply:
                    payload = reply["text"].encode()
                else:
                    payload = json.dumps(
                        completion(reply.get("content"), reply.get("tokens", 7))
                    ).encode()
                self.send_response(reply.get("status", 200))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (reply.get("headers") or {}).items():
                    self.send_header(k, v)
                if "truncate" in reply:
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(payload[: reply["truncate"]])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = _Server(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True  # a hanging reply never blocks close()
        self.httpd.handle_error = lambda *_: None  # type: ignore[method-assign] # gone clients
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def add(self, *items: Script) -> None:
        self.script.extend(items)

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            item: Script | None = self.script.popleft() if self.script else None
        if item is None:
            if self.reply is None:
                return http_error(500, "script exhausted")
            item = self.reply
        return item(body) if callable(item) else item

    def _admit(self) -> Reply | None:
        """None when the request may proceed, else the 429 to send."""
        with self._lock:
            now = time.monotonic()
            while self._accepted and self._accepted[0] <= now - self.window_s:
                self._accepted.popleft()
            retry_after = None
            if self.max_concurrency is not None and self._in_flight >= self.max_concurrency:
                retry_after = 1.0
            elif self.max_requests is not None and len(self._accepted) >= self.max_requests:
                retry_after = max(0.001, self._accepted[0] + self.window_s - now)
            if retry_after is not None:
                self.rejected += 1
                return http_error(429, "rate limit exceeded", math.ceil(retry_after * 1000) / 1000)
            self._accepted.append(now)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return None

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> OpenAIServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# What llama-cpp-python's server (0.3.x) answers to `response_format: {"type": "json_schema"}`
# (its ResponseFormat knows only "text" and "json_object"); checked against the real server
# by tests/integration/test_quickstart.py.
LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}"
)


def rejects_json_schema(
    reply: Callable[[dict[str, Any]], Reply],
) -> Callable[[dict[str, Any]], Reply]:
    """`reply`, behind a server that rejects ``json_schema`` the way llama-cpp-python's does:
    HTTP 500, while ``json_object`` with a schema, and no format at all, are answered."""

    def answer(body: dict[str, Any]) -> Reply:
        if (body.get("response_format") or {}).get("type") == "json_schema":
            return {
                "status": 500,
                "text": json.dumps({"error": {"message": LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR,
                                              "type": "internal_server_error"}}),
            }  # fmt: skip
        return reply(body)

    return answer
