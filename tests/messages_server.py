"""A loopback stand-in for the Anthropic Messages API, scriptable per request."""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
    "refusal",
    "reply_name",
    "cut_off",
    "thinking_only",
    "Model",
    "TODAY",
    "OF_2025",
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

EFFORTS = ("low", "medium", "high", "xhigh", "max")


@dataclass
class Model:
    """One model as the Models API lists it, and how its Messages endpoint treats a request.

    `thinks` (thinking when `thinking` is omitted), `forced_tool` (tool_choice tool/any accepted with thinking
    off) and `sampling` (temperature/top_p/top_k and an assistant prefill accepted) are the request rules the
    model pages and migration guides state; the Models API does not list them.
    """

    id: str
    line: str | None
    lifecycle: str = "active"
    retires_at: str | None = None
    structured: bool = True
    thinking: tuple[str, ...] = ("adaptive", "disabled")  # accepted thinking.type values
    efforts: tuple[str, ...] = EFFORTS[:4]
    thinks: bool = True
    forced_tool: bool = True
    sampling: bool = False
    created_at: str = "2026-10-07T00:00:00Z"

    def info(self, capabilities: bool = True) -> dict:
        """The Models API's ModelInfo of this model (a 2025 server lists no lifecycle nor capabilities)."""
        out = {"type": "model", "id": self.id, "display_name": self.id, "created_at": self.created_at}
        if not capabilities:
            return out
        yes = lambda b: {"supported": bool(b)}  # noqa: E731
        types = ("adaptive", "enabled", "disabled", "between_tools")
        return {
            **out,
            "lifecycle": self.lifecycle,
            "line": self.line,
            "retires_at": self.retires_at,
            "deprecated_at": None if self.lifecycle == "active" else "2026-06-01T00:00:00Z",
            "max_input_tokens": 1_000_000,
            "max_tokens": 128_000,
            "capabilities": {
                "batch": yes(True),
                "citations": yes(True),
                "code_execution": yes(False),
                "context_management": {
                    "supported": False,
                    "clear_thinking_20251015": None,
                    "clear_tool_uses_20250919": None,
                    "compact_20260112": None,
                },
                "effort": {"supported": bool(self.efforts), **{e: yes(e in self.efforts) for e in EFFORTS}},
                "image_input": yes(True),
                "pdf_input": yes(True),
                "server_tools": {"supported": False},
                "structured_outputs": yes(self.structured),
                "thinking": {
                    "supported": any(t in self.thinking for t in ("adaptive", "enabled")),
                    "types": {t: yes(t in self.thinking) for t in types},
                },
            },
        }


# The models of today (December 2026), as their model pages describe them.
TODAY = (
    Model("claude-haiku-5-5", "haiku"),
    Model("claude-sonnet-5-5", "sonnet", thinking=("adaptive", "between_tools"), forced_tool=False),
    Model("claude-opus-5-5", "opus", thinking=("adaptive",), forced_tool=False),
    Model(
        "claude-sonnet-4-6",
        "sonnet",
        thinking=("adaptive", "enabled", "disabled"),
        efforts=EFFORTS[:3] + ("max",),
        thinks=False,
        sampling=True,
        created_at="2026-02-17T00:00:00Z",
    ),
    Model(
        "claude-haiku-4-5",
        "haiku",
        lifecycle="deprecated",
        retires_at="2027-02-15T00:00:00Z",
        structured=False,
        thinking=("enabled", "disabled"),
        efforts=(),
        thinks=False,
        sampling=True,
        created_at="2025-10-01T00:00:00Z",
    ),
    Model(
        "claude-sonnet-4-5",
        "sonnet",
        lifecycle="retired",
        retires_at="2026-11-30T00:00:00Z",
        structured=False,
        thinking=("enabled", "disabled"),
        efforts=(),
        thinks=False,
        sampling=True,
        created_at="2025-09-29T00:00:00Z",
    ),
    # thinking only when asked (thinking.type enabled with a budget), as every model before adaptive thinking
    Model(
        "claude-opus-4-5",
        "opus",
        lifecycle="deprecated",
        retires_at="2027-01-22T00:00:00Z",
        thinking=("enabled", "disabled"),
        efforts=EFFORTS[:3],
        thinks=False,
        sampling=True,
        created_at="2025-11-24T00:00:00Z",
    ),
    # a model the API lists and the shipped price table does not: the tests of "no price, exit 2"
    Model("claude-unpriced-9", None, created_at="2026-01-01T00:00:00Z"),
)
# The API of 2025: the models of then, no thinking unless asked, a forced tool always accepted, and a Models API
# that lists no lifecycle nor capabilities.
OF_2025 = (
    Model(
        "claude-sonnet-4-5",
        "sonnet",
        structured=False,
        thinking=("enabled", "disabled"),
        efforts=(),
        thinks=False,
        sampling=True,
    ),
    Model(
        "claude-haiku-4-5",
        "haiku",
        structured=False,
        thinking=("enabled", "disabled"),
        efforts=(),
        thinks=False,
        sampling=True,
    ),
)
# JSON Schema keywords structured outputs do not take (the parser enforces what they would have said)
UNSUPPORTED_SCHEMA = ("if", "then", "else", "not", "allOf", "oneOf", "minimum", "maximum", "minLength", "maxLength")


@dataclass
class Request:
    """One POST /v1/messages as the server saw it."""

    n: int
    body: Any
    headers: dict[str, str]
    prompt: str
    system: str
    at: float = 0.0  # time.monotonic() when it arrived
    # (tokens, text) when the model thinks before answering
    thinking: tuple[int, str] | None = None


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
    return "\n".join(
        _blocks_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"
    )


def _json_reply(code: int, payload: dict, headers: dict[str, str] | None = None) -> Reply:
    """A JSON body with its content type."""
    return Reply(code, json.dumps(payload).encode(), {"content-type": "application/json", **(headers or {})})


def _forced(body: Any) -> str | None:
    """The tool a request forces (tool_choice of type tool, or any: its first tool), else None."""
    choice = (body.get("tool_choice") or {}) if isinstance(body, dict) else {}
    if choice.get("type") == "tool":
        return choice.get("name")
    if choice.get("type") == "any":
        return ((body.get("tools") or [{}])[0]).get("name")
    return None


def _message(
    req: Request, content: list, stop_reason: str, input_tokens: int, output_tokens: int, usage: bool, model: str | None
) -> dict:
    body = req.body if isinstance(req.body, dict) else {}
    # the model thought first: a thinking block, its tokens billed as output
    if req.thinking is not None:
        content = [{"type": "thinking", "thinking": req.thinking[1], "signature": "sig"}, *content]
        output_tokens += req.thinking[0]
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


def text(
    s: str,
    input_tokens: int = 100,
    output_tokens: int = 20,
    usage: bool = True,
    model: str | None = None,
    headers: dict[str, str] | None = None,
) -> Action:
    """A 200 Message whose only content block is the text `s`."""

    def run(req: Request, stop: threading.Event) -> Reply:
        content = [{"type": "text", "text": s}]
        return _json_reply(200, _message(req, content, "end_turn", input_tokens, output_tokens, usage, model), headers)

    return Action(f"text({s[:30]!r})", run)


def tool(
    answer: Any,
    input_tokens: int = 100,
    output_tokens: int = 20,
    name: str | None = None,
    headers: dict[str, str] | None = None,
) -> Action:
    """A 200 Message answering `answer`: the forced tool's input (as `name` if given) when the request forces one,
    else a text block of its JSON (structured outputs, a plain request)."""

    def run(req: Request, stop: threading.Event) -> Reply:
        forced = _forced(req.body)
        # structured outputs or a plain request: the answer is the text
        if forced is None:
            content = [{"type": "text", "text": json.dumps(answer)}]
            return _json_reply(
                200, _message(req, content, "end_turn", input_tokens, output_tokens, True, None), headers
            )
        content = [{"type": "tool_use", "id": f"toolu_{req.n:04d}", "name": name or forced, "input": answer}]
        return _json_reply(200, _message(req, content, "tool_use", input_tokens, output_tokens, True, None), headers)

    return Action(f"tool({json.dumps(answer)[:30]})", run)


def refusal(input_tokens: int = 100, output_tokens: int = 5) -> Action:
    """A 200 Message a classifier stopped: `stop_reason: "refusal"` and no answer (billed as usual)."""

    def run(req: Request, stop: threading.Event) -> Reply:
        return _json_reply(200, _message(req, [], "refusal", input_tokens, output_tokens, True, None))

    return Action("refusal", run)


def cut_off(partial: str = '{"same": tr', input_tokens: int = 100) -> Action:
    """A 200 Message that ran out at max_tokens before its answer was whole (stop_reason max_tokens)."""

    def run(req: Request, stop: threading.Event) -> Reply:
        body = req.body if isinstance(req.body, dict) else {}
        content = [{"type": "text", "text": partial}] if partial else []
        return _json_reply(
            200, _message(req, content, "max_tokens", input_tokens, int(body.get("max_tokens") or 0), True, None)
        )

    return Action("cut_off", run)


def thinking_only(input_tokens: int = 100, output_tokens: int = 20, thought: str = "Weighing the evidence.") -> Action:
    """A 200 Message whose only content block is a thinking block: no text, no tool input (billed as usual)."""

    def run(req: Request, stop: threading.Event) -> Reply:
        # whether or not the model thinks by default
        req.thinking = (req.thinking or (0, thought))[0], thought
        return _json_reply(200, _message(req, [], "end_turn", input_tokens, output_tokens, True, None))

    return Action("thinking_only", run)


def ratelimit(kind: str = "requests", remaining: int = 0, reset_in: float = 1.0) -> dict[str, str]:
    """anthropic-ratelimit-* headers saying `remaining` of `kind` are left until `reset_in` seconds from now."""
    reset = (datetime.now(UTC) + timedelta(seconds=reset_in)).isoformat(timespec="milliseconds")
    return {
        f"anthropic-ratelimit-{kind}-limit": "50",
        f"anthropic-ratelimit-{kind}-remaining": str(remaining),
        f"anthropic-ratelimit-{kind}-reset": reset.replace("+00:00", "Z"),
    }


def _error_reply(code: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An Anthropic-style error body for `code`."""
    kind = ERROR_TYPES.get(code, "api_error" if code >= 500 else "invalid_request_error")
    return _json_reply(code, {"type": "error", "error": {"type": kind, "message": message}}, headers)


def status(
    code: int,
    retry_after: float | str | None = None,
    message: str = "scripted error",
    headers: dict[str, str] | None = None,
) -> Action:
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
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        """GET /v1/models[/{id}], /v1/messages/batches (the list), /v1/messages/batches/{id} and its results."""
        path, _, query = self.path.partition("?")
        if path.rstrip("/") == "/v1/models" or path.startswith("/v1/models/"):
            self._send(
                self.server.owner._models_get(path.rstrip("/").removeprefix("/v1/models").strip("/"), query),
                "req_models",
            )
            return
        if path.rstrip("/") == "/v1/messages/batches":
            self._send(self.server.owner._batch_list(query), "req_batch")
            return
        m = re.fullmatch(r"/v1/messages/batches/([\w-]+)(/results)?", path.rstrip("/"))
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
    owner: MessagesServer


@dataclass
class Batch:
    """A Message Batch as the server holds it: its requests, and their results once it has ended."""

    id: str
    requests: list[dict]
    created_at: str
    results: list[dict] | None = None  # None while processing
    # archived: ended, its results no longer available (results_url null)
    archived_at: str | None = None


class MessagesServer:
    """A scripted `POST /v1/messages` server on 127.0.0.1, one thread per request.

    Also the Message Batches endpoints as the API has them: create, retrieve, list (newest first, paged with
    `limit`, `after_id` and `before_id`) and results (JSON Lines). A batch stays `in_progress` until
    `end_batches()`, which answers each of its requests with `responder` (or `batch_outcome`: "expired",
    "errored", "invalid", "canceled"); `archive(id)` ends it with its results gone (`results_url: null`), and
    `batch_create_hold`, while it is set and not released, keeps a create's reply back after the batch is made
    (the API has it, the client waits: what a SIGTERM during the create meets).
    `max_body` makes any larger request body a 400 "prompt is too long", as the real API does.
    """

    def __init__(self, responder: Callable[[Request, int], Action] = default_responder, era: str = "today") -> None:
        self.responder = responder
        # The API of `era`: "today" (the Models API with lifecycles and capabilities, models that think, the
        # request rules of the 5.5 models) or "2025" (the models and rules of then). `models` is the catalogue.
        self.era = era
        self.models: dict[str, Model] = {m.id: m for m in (TODAY if era == "today" else OF_2025)}
        # output tokens a thinking model spends before its answer (billed as output)
        self.thinking_tokens = 0
        # what the next Models API calls get instead: an HTTP status, "hang", "html" (a proxy's 200 page) or "{}"
        # (a 200 JSON object that is no model)
        self.model_faults: deque = deque()
        # GET /v1/models lists by created_at, newest first; False: in catalogue order
        self.newest_first = True
        # Models API paths asked, in order
        self.model_calls: list[str] = []
        # (request n, why) of every Messages request refused as invalid
        self.rejected: list[tuple[int, str]] = []
        self.max_body: int | None = None
        self.batch_outcome: Callable[[int, dict], str | None] = lambda n, params: None
        self.batches: dict[str, Batch] = {}
        # "create", "retrieve <id>", "results <id>", "list", in order
        self.batch_calls: list[str] = []
        # HTTP statuses the next batch creations fail with
        self.batch_create_faults: deque[int] = deque()
        # set: a create's reply waits for it (batch made)
        self.batch_create_hold: threading.Event | None = None
        # set once a create has made its batch
        self.batch_created = threading.Event()
        # Describe requests (the forced tool `describe_reply`: one line per spelling) are answered here, apart
        # from the questions: they take no scripted action and are not in `calls`. By default no line at all, and
        # no usage, so a test of the questions sees the same candidates, calls and cost as before lines existed.
        self.describer: Callable[[Request, int], Action] = lambda req, n: tool(
            {"lines": []}, input_tokens=0, output_tokens=0
        )
        self.describe_requests: list[Request] = []
        # re-entered: _admit holds it while _invalid records a rejection
        self._lock = threading.RLock()
        self._requests: list[Request] = []
        self._queue: deque[Action] = deque()
        self._stop = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"

    def start(self) -> MessagesServer:
        """Begin serving in a daemon thread; returns self."""
        if self._thread is None:
            # A short poll interval keeps shutdown() (and so close()) fast.
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="messages-server"
            )
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

    def __enter__(self) -> MessagesServer:
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
        if ok and _is_describe(body):
            with self._lock:
                req = Request(
                    len(self.describe_requests),
                    body,
                    headers,
                    prompt_text(body),
                    _blocks_text(body.get("system")),
                    time.monotonic(),
                )
                self.describe_requests.append(req)
            if invalid := self._invalid(req):
                return req, invalid
            return req, self.describer(req, req.n)
        with self._lock:
            req = Request(
                len(self._requests),
                body,
                headers,
                prompt_text(body),
                _blocks_text(body.get("system")) if ok else "",
                time.monotonic(),
            )
            self._requests.append(req)
            if not ok:
                # A malformed request is the client's bug; don't spend a scripted action on it.
                return req, status(400, message="request body is not a JSON object")
            if invalid := self._invalid(req):
                return req, invalid
            if self.max_body is not None and size > self.max_body:
                return req, status(
                    400, message=f"prompt is too long: {size // 4} tokens > {self.max_body // 4} maximum"
                )
            action = self._queue.popleft() if self._queue else None
        # The responder runs outside the lock so it may read server.requests.
        return req, action or self.responder(req, req.n)

    # -- what a model accepts ---------------------------------------------------------------------------
    def _invalid(self, req: Request) -> Action | None:
        """The 404 or 400 the API of this era gives the request, or None; decides whether the model thinks first.

        Recorded in `rejected`, so a test can say that no request of a session was refused.
        """
        body = req.body
        model = self.models.get(body.get("model"))
        why = None
        code = 400
        thinking = (body.get("thinking") or {}).get("type")
        output = body.get("output_config") or {}
        forced = _forced(body)
        if model is None or model.lifecycle == "retired":
            code, why = 404, f"model: {body.get('model')}"
        elif not model.sampling and any(k in body for k in ("temperature", "top_p", "top_k")):
            why = f"temperature, top_p and top_k are not supported on {model.id}"
        elif not model.sampling and (body.get("messages") or [{}])[-1].get("role") == "assistant":
            why = f"assistant message prefill is not supported on {model.id}"
        elif thinking is not None and thinking not in model.thinking:
            why = f"thinking.type: {thinking!r} is not supported on {model.id}"
        elif "effort" in output and output["effort"] not in model.efforts:
            why = f"output_config.effort: {output['effort']!r} is not supported on {model.id}"
        elif "format" in output and not model.structured:
            why = f"output_config.format: structured outputs are not supported on {model.id}"
        elif "format" in output and (bad := _schema_fault(output["format"].get("schema"))):
            why = f"output_config.format.schema: {bad}"
        thinks = thinking in ("adaptive", "enabled") or (thinking is None and model is not None and model.thinks)
        if why is None and forced and thinks:
            why = "Thinking may not be enabled when tool_choice forces tool use."
        elif why is None and forced and not model.forced_tool:
            why = f"tool_choice: forced tool use is not supported on {model.id}"
        if why is not None:
            with self._lock:
                self.rejected.append((req.n, why))
            return status(code, message=why)
        req.thinking = (self.thinking_tokens, "Weighing the evidence.") if thinks else None
        return None

    def _models_get(self, model_id: str, query: str) -> Reply:
        """GET /v1/models/{id} (a retired model too) and GET /v1/models (active and deprecated, newest first)."""
        with self._lock:
            self.model_calls.append(model_id or f"list?{query}")
            fault = self.model_faults.popleft() if self.model_faults else None
        if fault == "hang":
            return None if self._stop.wait(60) else _error_reply(500, "hung")
        if fault == "html":
            return Reply(200, b"<html><body>Sign in to the proxy</body></html>", {"content-type": "text/html"})
        if fault == "{}":
            return _json_reply(200, {})
        if fault is not None:
            return _error_reply(fault, "scripted Models API failure")
        listed = self.era == "today"
        if model_id:
            model = self.models.get(model_id)
            if model is None:
                return _error_reply(404, f"model: {model_id}")
            return _json_reply(200, model.info(listed))
        asked = re.findall(r"lifecycle(?:%5B%5D|\[\])?=(\w+)", query) or ["active", "deprecated"]
        order = (
            sorted(self.models.values(), key=lambda m: m.created_at, reverse=True)
            if self.newest_first
            else list(self.models.values())
        )
        data = [m.info(listed) for m in order if not listed or m.lifecycle in asked]
        return _json_reply(
            200,
            {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            },
        )

    def retire(self, model_id: str, on: str = "2026-12-01T00:00:00Z") -> None:
        """The model retires: the Models API says so, and Messages answers 404 `model: ...` from now on."""
        with self._lock:
            # a new entry, never the shared TODAY one: other tests' servers keep the model active
            self.models[model_id] = replace(self.models[model_id], lifecycle="retired", retires_at=on)

    # -- Message Batches ----------------------------------------------------------------------------
    def _batch_json(self, batch: Batch) -> dict:
        ended = batch.results is not None
        counts = {
            "processing": 0 if ended else len(batch.requests),
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
        for r in batch.results or []:
            counts[r["result"]["type"]] += 1
        expires = datetime.fromisoformat(batch.created_at.replace("Z", "+00:00")) + timedelta(hours=24)
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": batch.created_at,
            "expires_at": expires.isoformat().replace("+00:00", "Z"),
            "ended_at": batch.created_at if ended else None,
            "cancel_initiated_at": None,
            "archived_at": batch.archived_at,
            "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results"
            if ended and not batch.archived_at
            else None,
        }

    def _batch_list(self, query: str) -> Reply:
        """GET /v1/messages/batches: newest first, `limit` (1 to 1000, default 20) a page, `after_id` the page
        after (older than) that batch, `before_id` the page before (newer)."""
        params = dict(part.split("=", 1) for part in query.split("&") if "=" in part)
        try:
            limit = int(params.get("limit", 20))
        except ValueError:
            return _error_reply(400, "limit: not an integer")
        if not 1 <= limit <= 1000:
            return _error_reply(400, "limit: must be from 1 to 1000")
        with self._lock:
            self.batch_calls.append("list")
            newest = sorted(self.batches.values(), key=lambda b: (b.created_at, b.id), reverse=True)
        ids = [b.id for b in newest]
        for cursor in ("after_id", "before_id"):
            if cursor in params and params[cursor] not in ids:
                return _error_reply(404, f"{cursor}: no batch {params[cursor]}")
        if "before_id" in params:
            end = ids.index(params["before_id"])
            page = newest[max(0, end - limit) : end]
            more = end - limit > 0
        else:
            start = ids.index(params["after_id"]) + 1 if "after_id" in params else 0
            page = newest[start : start + limit]
            more = start + limit < len(newest)
        return _json_reply(
            200,
            {
                "data": [self._batch_json(b) for b in page],
                "has_more": more,
                "first_id": page[0].id if page else None,
                "last_id": page[-1].id if page else None,
            },
        )

    def archive(self, batch_id: str) -> None:
        """The batch ends (if it had not) and is archived: its results are gone, `results_url` is null."""
        self.end_batches()
        with self._lock:
            self.batches[batch_id].archived_at = datetime.now(UTC).isoformat().replace("+00:00", "Z")

    def _batch_create(self, body: Any) -> Reply | None:
        requests = body.get("requests") if isinstance(body, dict) else None
        if (
            not isinstance(requests, list)
            or not requests
            or not all(
                isinstance(r, dict) and isinstance(r.get("custom_id"), str) and isinstance(r.get("params"), dict)
                for r in requests
            )
        ):
            return _error_reply(400, "requests: expected a list of {custom_id, params}")
        if len({r["custom_id"] for r in requests}) != len(requests):
            return _error_reply(400, "custom_id values must be unique within a batch")
        with self._lock:
            self.batch_calls.append("create")
            if self.batch_create_faults:
                return _error_reply(self.batch_create_faults.popleft(), "scripted batch failure")
            batch = Batch(
                f"msgbatch_{len(self.batches):04d}", requests, datetime.now(UTC).isoformat().replace("+00:00", "Z")
            )
            self.batches[batch.id] = batch
            hold = self.batch_create_hold
        self.batch_created.set()
        # the API has the batch; its reply waits
        if hold is not None and not hold.is_set():
            while not hold.wait(0.05):
                if self._stop.is_set():
                    return None
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
        if batch.archived_at:
            return _error_reply(404, f"batch {batch_id} is archived: its results are no longer available")
        data = "".join(json.dumps(r) + "\n" for r in batch.results).encode()
        return Reply(200, data, {"content-type": "application/binary"})

    def end_batches(self) -> None:
        """End every batch still processing: each request answered by `responder`, or by `batch_outcome`."""
        for batch in list(self.batches.values()):
            if batch.results is None:
                batch.results = [
                    {"custom_id": r["custom_id"], "result": self._batch_result(n, r["params"])}
                    for n, r in enumerate(batch.requests)
                ]

    def _batch_result(self, n: int, params: dict) -> dict:
        outcome = self.batch_outcome(n, params)
        if outcome in ("expired", "canceled"):
            return {"type": outcome}
        # invalid: the request's content was refused
        if outcome in ("errored", "invalid"):
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


CONTRACTS = {"same": "alias_reply", "decision": "prune_reply", "entails": "discovery_reply", "lines": "describe_reply"}


def reply_name(body: Any) -> str | None:
    """Which reply contract a request asks for, whatever its dialect: the forced tool's name, else the contract
    its structured output's schema is ("alias_reply" ...), else None (a plain request)."""
    if forced := _forced(body):
        return forced
    schema = (
        (((body.get("output_config") or {}).get("format") or {}).get("schema") or {}) if isinstance(body, dict) else {}
    )
    return next((name for key, name in CONTRACTS.items() if key in (schema.get("properties") or {})), None)


def _is_describe(body: dict) -> bool:
    """A describe request (one line per spelling): its forced tool, or the `lines` of its structured output."""
    if (body.get("tool_choice") or {}).get("name") == "describe_reply":
        return True
    if any(t.get("name") == "describe_reply" for t in body.get("tools") or [] if isinstance(t, dict)):
        return True
    schema = ((body.get("output_config") or {}).get("format") or {}).get("schema") or {}
    if "lines" in (schema.get("properties") or {}):
        return True
    return "one sentence saying what it names" in _blocks_text(body.get("system"))


def _schema_fault(schema: Any, where: str = "") -> str | None:
    """What structured outputs would refuse in a schema: a keyword they do not take, an open object."""
    if isinstance(schema, list):
        return next((f for i, x in enumerate(schema) if (f := _schema_fault(x, f"{where}[{i}]"))), None)
    if not isinstance(schema, dict):
        return None
    if bad := [k for k in UNSUPPORTED_SCHEMA if k in schema]:
        return f"{where or 'schema'}: keyword {bad[0]!r} is not supported"
    types = schema.get("type")
    if (types == "object" or (isinstance(types, list) and "object" in types)) and schema.get(
        "additionalProperties"
    ) is not False:
        return f"{where or 'schema'}: objects must set additionalProperties to false"
    return next((f for k, v in schema.items() if (f := _schema_fault(v, f"{where}.{k}"))), None)


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
