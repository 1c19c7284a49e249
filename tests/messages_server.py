"""A loopback stand-in for the Anthropic Messages API, scriptable per request."""

from __future__ import annotations

import argparse
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

__all__ = [
    "Action",
    "MessagesServer",
    "Reply",
    "Request",
    "DEFAULT_REPLY",
    "delay",
    "garbage",
    "hang",
    "prompt_text",
    "serve_forever_cli",
    "status",
    "text",
]

DEFAULT_REPLY = '{"same": false, "mechanism": ""}'

# Anthropic's error `type` for each status the tests script; others fall back by class.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Request:
    """One POST /v1/messages as the server saw it."""

    n: int
    body: Any
    headers: dict[str, str]
    prompt: str
    system: str


@dataclass
class Reply:
    """What goes back on the wire."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    """A named recipe for answering one request; `run` returns None to drop the reply."""

    name: str
    run: Callable[[Request, threading.Event], Reply | None]

    def __repr__(self) -> str:
        return f"<Action {self.name}>"


def _blocks_text(content: Any) -> str:
    """Text of a content field that is either a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def prompt_text(body: Any) -> str:
    """Concatenated text of the user messages in a Messages request body."""
    if not isinstance(body, dict):
        return ""
    messages = body.get("messages") or []
    return "\n".join(_blocks_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user")


def _json_reply(code: int, payload: dict, headers: dict[str, str] | None = None) -> Reply:
    """A JSON body with its content type."""
    return Reply(code, json.dumps(payload).encode(), {"content-type": "application/json", **(headers or {})})


def text(s: str, input_tokens: int = 100, output_tokens: int = 20, usage: bool = True, model: str | None = None) -> Action:
    """A 200 Message whose only content block is the text `s`."""

    def run(req: Request, stop: threading.Event) -> Reply:
        body = req.body if isinstance(req.body, dict) else {}
        message = {
            "id": f"msg_{req.n:04d}",
            "type": "message",
            "role": "assistant",
            "model": model or body.get("model") or "claude-test",
            "content": [{"type": "text", "text": s}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
        }
        if usage:
            message["usage"] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
        return _json_reply(200, message)

    return Action(f"text({s[:30]!r})", run)


def _error_reply(code: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An Anthropic-style error body for `code`."""
    kind = ERROR_TYPES.get(code, "api_error" if code >= 500 else "invalid_request_error")
    return _json_reply(code, {"type": "error", "error": {"type": kind, "message": message}}, headers)


def status(code: int, retry_after: float | str | None = None, message: str = "scripted error") -> Action:
    """An HTTP error with an Anthropic-style error body."""

    def run(req: Request, stop: threading.Event) -> Reply:
        return _error_reply(code, message, None if retry_after is None else {"retry-after": str(retry_after)})

    return Action(f"status({code})", run)


def garbage(raw: bytes | str, status: int = 200, content_type: str = "application/json") -> Action:
    """Send `raw` verbatim, e.g. a non-JSON body under a JSON content type."""
    data = raw.encode() if isinstance(raw, str) else raw

    def run(req: Request, stop: threading.Event) -> Reply:
        return Reply(status, data, {"content-type": content_type})

    return Action(f"garbage({data[:20]!r}, {status})", run)


def delay(seconds: float, action: Action) -> Action:
    """Wait `seconds`, then perform `action`; dropped if the server closes meanwhile."""

    def run(req: Request, stop: threading.Event) -> Reply | None:
        # Waiting on the close event, not time.sleep, lets close() cut a hang short.
        if stop.wait(seconds):
            return None
        return action.run(req, stop)

    return Action(f"delay({seconds}, {action.name})", run)


def held(event: threading.Event, action: Action) -> Action:
    """Wait until the test sets `event`, then perform `action`; dropped if the server closes meanwhile."""

    def run(req: Request, stop: threading.Event) -> Reply | None:
        while not event.wait(0.05):
            if stop.is_set():
                return None
        return action.run(req, stop)

    return Action(f"held({action.name})", run)


def hang(seconds: float) -> Action:
    """Stall for `seconds` before a normal reply, to outlast a client's timeout."""
    return Action(f"hang({seconds})", delay(seconds, text(DEFAULT_REPLY)).run)


def default_responder(request: Request, n: int) -> Action:
    """Answer every request with the 'not the same' verdict."""
    return text(DEFAULT_REPLY)


class _Handler(BaseHTTPRequestHandler):
    """Speaks just enough of the Messages API."""

    # HTTP/1.0: one request per connection, so no keep-alive thread outlives a reply.
    protocol_version = "HTTP/1.0"
    # A client that connects and never sends must not pin a thread forever.
    timeout = 30
    server: "_HTTPServer"

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        """Only POST /v1/messages exists."""
        self._send(_error_reply(404, f"no route {self.path}"), "req_unrouted")

    def do_POST(self) -> None:
        """Record the request, then answer with its scripted action."""
        owner = self.server.owner
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self._send(_error_reply(404, f"no route {self.path}"), "req_unrouted")
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        req, action = owner._admit(body, {k.lower(): v for k, v in self.headers.items()})
        self._send(action.run(req, owner._stop), f"req_{req.n}")

    def _send(self, reply: Reply | None, request_id: str) -> None:
        """Write `reply` (None means the server closed mid-wait: send nothing)."""
        if reply is None:
            return
        try:
            self.send_response(reply.status)
            for k, v in {**reply.headers, "request-id": request_id, "content-length": str(len(reply.body))}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(reply.body)
        except OSError:
            # The client gave up (timeout) before a delayed reply; nothing to tell it.
            pass


class _HTTPServer(ThreadingHTTPServer):
    """Carries a back-reference to its MessagesServer for the handlers."""

    daemon_threads = True
    # close() must not wait for handlers stuck on slow or silent clients.
    block_on_close = False
    owner: "MessagesServer"


class MessagesServer:
    """A scripted `POST /v1/messages` server on 127.0.0.1, one thread per request."""

    def __init__(self, responder: Callable[[Request, int], Action] = default_responder) -> None:
        self.responder = responder
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._queue: deque[Action] = deque()
        self._stop = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"

    def start(self) -> "MessagesServer":
        """Begin serving in a daemon thread; returns self."""
        if self._thread is None:
            # A short poll interval keeps shutdown() (and so close()) fast.
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="messages-server")
            self._thread.start()
        return self

    def close(self) -> None:
        """Wake any hanging handlers and stop serving; idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=2)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "MessagesServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def script(self, actions: Iterable[Action]) -> None:
        """Replace the queue: each request takes the next action, then `responder` takes over."""
        with self._lock:
            self._queue = deque(actions)

    @property
    def requests(self) -> list[Request]:
        """A snapshot of the requests received so far."""
        with self._lock:
            return list(self._requests)

    @property
    def calls(self) -> int:
        """How many POSTs to /v1/messages arrived."""
        with self._lock:
            return len(self._requests)

    def _admit(self, body: Any, headers: dict[str, str]) -> tuple[Request, Action]:
        """Record a request and choose its action, under the lock so `n` is unique."""
        ok = isinstance(body, dict)
        with self._lock:
            req = Request(len(self._requests), body, headers, prompt_text(body), _blocks_text(body.get("system")) if ok else "")
            self._requests.append(req)
            if not ok:
                # A malformed request is the client's bug; don't spend a scripted action on it.
                return req, status(400, message="request body is not a JSON object")
            action = self._queue.popleft() if self._queue else None
        # The responder runs outside the lock so it may read server.requests.
        return req, action or self.responder(req, req.n)


def serve_forever_cli(argv: list[str] | None = None) -> None:
    """Serve a fixed reply after a fixed latency until killed; prints the URL first."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to wait before each reply")
    parser.add_argument("--reply", default=DEFAULT_REPLY, help="text of every assistant reply")
    args = parser.parse_args(argv)
    reply = text(args.reply)
    server = MessagesServer(lambda req, n: delay(args.latency, reply) if args.latency else reply).start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    serve_forever_cli()
