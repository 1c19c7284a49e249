"""A loopback stand-in for the Anthropic Messages API, scriptable per request."""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from datetime import datetime, timedelta, timezone
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
    "ratelimit",
    "serve_forever_cli",
    "status",
    "text",
    "tool",
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
    at: float = 0.0  # time.monotonic() when it arrived


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


def _message(req: Request, content: list, stop_reason: str, input_tokens: int, output_tokens: int, usage: bool,
             model: str | None) -> dict:
    body = req.body if isinstance(req.body, dict) else {}
    message = {
        "id": f"msg_{req.n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model or body.get("model") or "claude-test",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
    }
    if usage:
        message["usage"] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    return message


def text(s: str, input_tokens: int = 100, output_tokens: int = 20, usage: bool = True, model: str | None = None,
         headers: dict[str, str] | None = None) -> Action:
    """A 200 Message whose only content block is the text `s`."""

    def run(req: Request, stop: threading.Event) -> Reply:
        content = [{"type": "text", "text": s}]
        return _json_reply(200, _message(req, content, "end_turn", input_tokens, output_tokens, usage, model), headers)

    return Action(f"text({s[:30]!r})", run)


def tool(answer: Any, input_tokens: int = 100, output_tokens: int = 20, name: str | None = None,
         headers: dict[str, str] | None = None) -> Action:
    """A 200 Message calling the tool the request forced (or `name`) with `answer` as its input."""

    def run(req: Request, stop: threading.Event) -> Reply:
        body = req.body if isinstance(req.body, dict) else {}
        forced = (body.get("tool_choice") or {}).get("name") or "reply"
        content = [{"type": "tool_use", "id": f"toolu_{req.n:04d}", "name": name or forced, "input": answer}]
        return _json_reply(200, _message(req, content, "tool_use", input_tokens, output_tokens, True, None), headers)

    return Action(f"tool({json.dumps(answer)[:30]})", run)


def ratelimit(kind: str = "requests", remaining: int = 0, reset_in: float = 1.0) -> dict[str, str]:
    """anthropic-ratelimit-* headers saying `remaining` of `kind` are left until `reset_in` seconds from now."""
    reset = (datetime.now(timezone.utc) + timedelta(seconds=reset_in)).isoformat(timespec="milliseconds")
    return {f"anthropic-ratelimit-{kind}-limit": "50", f"anthropic-ratelimit-{kind}-remaining": str(remaining),
            f"anthropic-ratelimit-{kind}-reset": reset.replace("+00:00", "Z")}


def _error_reply(code: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An Anthropic-style error body for `code`."""
    kind = ERROR_TYPES.get(code, "api_error" if code >= 500 else "invalid_request_error")
    return _json_reply(code, {"type": "error", "error": {"type": kind, "message": message}}, headers)


def status(code: int, retry_after: float | str | None = None, message: str = "scripted error",
           headers: dict[str, str] | None = None) -> Action:
    """An HTTP error with an Anthropic-style error body (and `retry-after` when given)."""

    def run(req: Request, stop: threading.Event) -> Reply:
        extra = {**(headers or {}), **({} if retry_after is None else {"retry-after": str(retry_after)})}
        return _error_reply(code, message, extra)

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
        """GET /v1/messages/batches/{id} and its results; nothing else."""
        m = re.fullmatch(r"/v1/messages/batches/([\w-]+)(/results)?", self.path.split("?")[0].rstrip("/"))
        if not m:
            self._send(_error_reply(404, f"no route {self.path}"), "req_unrouted")
            return
        self._send(self.server.owner._batch_get(m.group(1), bool(m.group(2))), "req_batch")

    def do_POST(self) -> None:
        """Record the request, then answer with its scripted action (or create a Message Batch)."""
        owner = self.server.owner
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?")[0].rstrip("/")
        if path not in ("/v1/messages", "/v1/messages/batches"):
            self._send(_error_reply(404, f"no route {self.path}"), "req_unrouted")
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if path == "/v1/messages/batches":
            self._send(owner._batch_create(body), "req_batch")
            return
        req, action = owner._admit(body, {k.lower(): v for k, v in self.headers.items()}, len(raw))
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


@dataclass
class Batch:
    """A Message Batch as the server holds it: its requests, and their results once it has ended."""

    id: str
    requests: list[dict]
    created_at: str
    results: list[dict] | None = None  # None while processing


class MessagesServer:
    """A scripted `POST /v1/messages` server on 127.0.0.1, one thread per request.

    Also the Message Batches endpoints: a batch stays `in_progress` until `end_batches()`, which answers
    each of its requests with `responder` (or `batch_outcome`: "expired", "errored", "invalid", "canceled").
    `max_body` makes any larger request body a 400 "prompt is too long", as the real API does.
    """

    def __init__(self, responder: Callable[[Request, int], Action] = default_responder) -> None:
        self.responder = responder
        self.max_body: int | None = None
        self.batch_outcome: Callable[[int, dict], str | None] = lambda n, params: None
        self.batches: dict[str, Batch] = {}
        self.batch_calls: list[str] = []  # "create", "retrieve <id>", "results <id>", in order
        self.batch_create_faults: deque[int] = deque()  # HTTP statuses the next batch creations fail with
        # Describe requests (the forced tool `describe_reply`: one line per spelling) are answered here, apart
        # from the questions: they take no scripted action and are not in `calls`. By default no line at all, and
        # no usage, so a test of the questions sees the same candidates, calls and cost as before lines existed.
        self.describer: Callable[[Request, int], Action] = \
            lambda req, n: tool({"lines": []}, input_tokens=0, output_tokens=0)
        self.describe_requests: list[Request] = []
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

    def _admit(self, body: Any, headers: dict[str, str], size: int = 0) -> tuple[Request, Action]:
        """Record a request and choose its action, under the lock so `n` is unique."""
        ok = isinstance(body, dict)
        if ok and (body.get("tool_choice") or {}).get("name") == "describe_reply":
            with self._lock:
                req = Request(len(self.describe_requests), body, headers, prompt_text(body),
                              _blocks_text(body.get("system")), time.monotonic())
                self.describe_requests.append(req)
            return req, self.describer(req, req.n)
        with self._lock:
            req = Request(len(self._requests), body, headers, prompt_text(body),
                          _blocks_text(body.get("system")) if ok else "", time.monotonic())
            self._requests.append(req)
            if not ok:
                # A malformed request is the client's bug; don't spend a scripted action on it.
                return req, status(400, message="request body is not a JSON object")
            if self.max_body is not None and size > self.max_body:
                return req, status(400, message=f"prompt is too long: {size // 4} tokens > {self.max_body // 4} maximum")
            action = self._queue.popleft() if self._queue else None
        # The responder runs outside the lock so it may read server.requests.
        return req, action or self.responder(req, req.n)


    # -- Message Batches ----------------------------------------------------------------------------
    def _batch_json(self, batch: Batch) -> dict:
        ended = batch.results is not None
        counts = {"processing": 0 if ended else len(batch.requests), "succeeded": 0, "errored": 0,
                  "canceled": 0, "expired": 0}
        for r in batch.results or []:
            counts[r["result"]["type"]] += 1
        return {"id": batch.id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
                "request_counts": counts, "created_at": batch.created_at, "expires_at": batch.created_at,
                "ended_at": batch.created_at if ended else None, "cancel_initiated_at": None, "archived_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results" if ended else None}

    def _batch_create(self, body: Any) -> Reply:
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests or not all(
                isinstance(r, dict) and isinstance(r.get("custom_id"), str) and isinstance(r.get("params"), dict)
                for r in requests):
            return _error_reply(400, "requests: expected a list of {custom_id, params}")
        if len({r["custom_id"] for r in requests}) != len(requests):
            return _error_reply(400, "custom_id values must be unique within a batch")
        with self._lock:
            self.batch_calls.append("create")
            if self.batch_create_faults:
                return _error_reply(self.batch_create_faults.popleft(), "scripted batch failure")
            batch = Batch(f"msgbatch_{len(self.batches):04d}", requests,
                          datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"))
            self.batches[batch.id] = batch
        return _json_reply(200, self._batch_json(batch))

    def _batch_get(self, batch_id: str, results: bool) -> Reply:
        with self._lock:
            batch = self.batches.get(batch_id)
            self.batch_calls.append(f"{'results' if results else 'retrieve'} {batch_id}")
        if batch is None:
            return _error_reply(404, f"no batch {batch_id}")
        if not results:
            return _json_reply(200, self._batch_json(batch))
        if batch.results is None:
            return _error_reply(400, f"batch {batch_id} is still processing")
        data = "".join(json.dumps(r) + "\n" for r in batch.results).encode()
        return Reply(200, data, {"content-type": "application/binary"})

    def end_batches(self) -> None:
        """End every batch still processing: each request answered by `responder`, or by `batch_outcome`."""
        for batch in list(self.batches.values()):
            if batch.results is None:
                batch.results = [{"custom_id": r["custom_id"], "result": self._batch_result(n, r["params"])}
                                 for n, r in enumerate(batch.requests)]

    def _batch_result(self, n: int, params: dict) -> dict:
        outcome = self.batch_outcome(n, params)
        if outcome in ("expired", "canceled"):
            return {"type": outcome}
        if outcome in ("errored", "invalid"):  # invalid: the request's content was refused
            kind = "invalid_request_error" if outcome == "invalid" else "api_error"
            return {"type": "errored", "error": {"type": "error", "error": {"type": kind, "message": "scripted"}}}
        size = len(json.dumps(params))
        if self.max_body is not None and size > self.max_body:
            reply = _error_reply(400, f"prompt is too long: {size // 4} tokens > {self.max_body // 4} maximum")
        else:
            req = Request(-1 - n, params, {}, prompt_text(params), _blocks_text(params.get("system")), time.monotonic())
            reply = self.responder(req, req.n).run(req, self._stop)
        body = json.loads(reply.body)
        if reply.status == 200:
            return {"type": "succeeded", "message": body}
        return {"type": "errored", "error": body}


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
