"""The API transport: one Messages request with counted retries, and what came back as a Completion.

Shared by the judge (one question at a time) and batches (many at once), through these public names.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .config import Config
from .errors import ConfigError, JudgeRefused, Refused, Unavailable
from .jsonl import dumps
from .limiter import RateLimiter
from .models import Dialect, Lineup, has_key

# for annotations: at run time it is imported where used (start-up time, see __init__)
if TYPE_CHECKING:
    import anthropic
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

log = logging.getLogger(__name__)


NO_KEY = "judge: no API key (set ANTHROPIC_API_KEY)"


def require_key() -> None:
    """Exit 2 before a session changes anything, not at its first question."""
    if not has_key():
        raise ConfigError(NO_KEY)


@dataclass
class Completion:
    """One reply: its text (or the forced tool's input as JSON), what it billed, and how it ended."""

    text: str
    tokens_in: int | None
    tokens_out: int | None
    attempts: int = 1
    request_id: str | None = None
    # a Message Batch result: billed at the batch price, already in the ledger
    batch: bool = False
    # "max_tokens": cut off, the answer may be partial; "refusal": no answer
    stop_reason: str | None = None


REFUSAL = "the model declined to answer (stop_reason refusal)"


def status_retryable(code: int) -> bool:
    """Whether an HTTP status is worth asking again (timeouts, conflicts, rate limits, server errors)."""
    return code in (408, 409, 429) or code >= 500


# The key, its permission, the model: wrong for every question alike, so the session stops.
STOPS_SESSION = (401, 403, 404)


class AnthropicBackend:
    """The Messages API through anthropic.AsyncAnthropic; retries are ours, counted (SDK max_retries=0).

    The verdict is asked for in the dialect its model accepts (models.py: structured outputs, a forced tool
    with thinking off, or a plain request), from the capabilities the session's Lineup read; every call of
    the session goes through one shared RateLimiter.
    """

    kind: Literal["anthropic"] = "anthropic"

    def __init__(
        self, config: Config, client: anthropic.AsyncAnthropic | None = None, lineup: Lineup | None = None
    ) -> None:
        # here, not at the top: it is 1.7 s of start-up a caught-up session never needs
        import anthropic

        self.config = config.judge
        self.model = config.judge.model
        try:
            # ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL are read by the SDK itself.
            self.client = client or anthropic.AsyncAnthropic(max_retries=0, timeout=config.judge.timeout_s)
        except anthropic.AnthropicError as e:
            raise ConfigError(f"judge: {e} (set ANTHROPIC_API_KEY)") from None
        if not (self.client.api_key or self.client.auth_token):
            # the SDK would only say so at the first request, as a TypeError
            raise ConfigError(NO_KEY)
        # no lineup read: every model in the plain dialect
        self.lineup = lineup or Lineup()
        self.effort = config.judge.effort
        self.limiter = RateLimiter(config.judge.concurrency, config.judge.max_tokens, config.judge.backoff_max_s)

    def dialect(self, model: str | None = None) -> Dialect:
        """How `model` (default: the judge's) is asked, as this session's lineup read it."""
        return self.lineup.dialect(model or self.model, self.effort)

    def shape(self, tool: dict[str, Any] | None, model: str | None = None) -> dict[str, Any] | None:
        """What of a request depends on its reply contract in this model's dialect (part of the cache key)."""
        return self.dialect(model).shape(tool)

    def _wait(self, attempt: int) -> float:
        base = min(self.config.backoff_max_s, self.config.backoff_s * 2 ** (attempt - 1))
        return base * (0.5 + random.random() / 2)

    def params(
        self,
        system: str,
        user: str,
        tool: dict[str, Any] | None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> MessageCreateParamsNonStreaming:
        """The body of one Messages request (also one Message Batch request's params).

        `max_tokens`: a reply longer than a verdict's (a describe request's lines), else judge.max_tokens;
        `model`: another than the judge's (describe.model writes the lines).
        """
        d = self.dialect(model)
        # never temperature, top_p, top_k nor an assistant prefill: the 5.5 models refuse them
        body: MessageCreateParamsNonStreaming = {
            "model": model or self.model,
            "max_tokens": d.max_tokens(max_tokens or self.config.max_tokens),
            "system": system,
            "messages": [{"role": "user", "content": user}],
        }
        return d.params(body, tool)

    async def complete(
        self,
        system: str,
        user: str,
        subject: dict[str, Any],
        position: int,
        *,
        tool: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> Completion:
        import anthropic

        last = "no attempt"
        for attempt in range(1, self.config.max_attempts + 1):
            await self.limiter.wait()
            # the server asked every worker to wait: the limiter logs that once
            shared = False
            try:
                raw = await self.client.messages.with_raw_response.create(
                    **self.params(system, user, tool, max_tokens, model)
                )
                self.limiter.observe(raw.headers)
                msg = await raw.parse()
            except anthropic.APIStatusError as e:
                rid = getattr(e, "request_id", None) or e.response.headers.get("request-id")
                if e.status_code in STOPS_SESSION:
                    asked = model or self.model
                    raise JudgeRefused(
                        f"judge refused the request: HTTP {e.status_code} {error_message(e)} (request {rid}); "
                        "check ANTHROPIC_API_KEY, the model name and ANTHROPIC_BASE_URL",
                        asked if e.status_code == 404 and asked in error_message(e) else None,
                    ) from None
                if not status_retryable(e.status_code):
                    # about this request's content (too long, too large): this question only
                    raise Refused(f"HTTP {e.status_code} {error_message(e)} (request {rid})", attempt) from None
                last = f"HTTP {e.status_code} (request {rid})"
                self.limiter.observe(e.response.headers)
                shared = self.limiter.pause_for(e.status_code, e.response.headers)
            except anthropic.APIConnectionError as e:  # includes APITimeoutError
                last = f"{type(e).__name__}: {e}"
            # a body that is not JSON at all
            except (anthropic.APIResponseValidationError, ValueError) as e:
                last = f"malformed response: {type(e).__name__}"
            else:
                done = completion(msg, tool)
                if done is not None:
                    done.attempts, done.request_id = attempt, raw.request_id
                    # billed, and about this question: never asked again here
                    if done.stop_reason == "refusal":
                        raise Refused(f"{REFUSAL} (request {raw.request_id})", attempt, done)
                    return done
                last = "malformed response: a 200 whose body is not a Message"
            # info, not a warning: the pass's line names the first error, and `-q` must silence retries
            (log.debug if shared else log.info)(
                "judge call failed (%s), attempt %d of %d", last, attempt, self.config.max_attempts
            )
            if attempt < self.config.max_attempts and not shared:
                await asyncio.sleep(self._wait(attempt))
        raise Unavailable(f"{last} after {self.config.max_attempts} attempts", self.config.max_attempts)


def completion(msg: anthropic.types.Message, tool: dict[str, Any] | None) -> Completion | None:
    """A Message as a Completion: the forced tool's input as JSON text, else its text blocks; None if malformed.

    Read by block type: thinking blocks are skipped, never taken for the answer. The output tokens are the API's,
    thinking included (it is billed as output).
    """
    import anthropic

    content = getattr(msg, "content", None) if isinstance(msg, anthropic.types.Message) else None
    if not isinstance(content, list):
        return None
    usage = getattr(msg, "usage", None)
    tokens_in, tokens_out = getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)
    stop_reason = getattr(msg, "stop_reason", None)
    if tool:
        for block in content:
            if getattr(block, "type", "") == "tool_use" and getattr(block, "name", "") == tool["name"]:
                # the raw reply recorded, and parsed by the same strict parser as a text reply
                return Completion(
                    dumps(getattr(block, "input", None), ensure_ascii=False),
                    tokens_in,
                    tokens_out,
                    stop_reason=stop_reason,
                )
    text = message_text(msg)
    return None if text is None else Completion(text, tokens_in, tokens_out, stop_reason=stop_reason)


def message_text(msg: anthropic.types.Message) -> str | None:
    """The text blocks of a Message, or None when the body only looks like one.

    The SDK builds a Message from whatever JSON came back without validating it,
    so a list, a missing content field or a text block without text all arrive here.
    """
    import anthropic

    content = getattr(msg, "content", None) if isinstance(msg, anthropic.types.Message) else None
    if not isinstance(content, list):
        return None
    texts = [getattr(b, "text", None) for b in content if getattr(b, "type", "") == "text"]
    strings = [t for t in texts if isinstance(t, str)]
    return "".join(strings) if len(strings) == len(texts) else None


def error_message(e: anthropic.APIStatusError) -> str:
    """The API's own `type: message` of an error reply, else the SDK's message."""
    body = e.body if isinstance(e.body, dict) else {}
    err = body.get("error", {}) if isinstance(body.get("error"), dict) else {}
    return f"{err.get('type', '')}: {err.get('message', '')}".strip(": ") or str(e.message)
