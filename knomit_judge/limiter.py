"""One rate limiter shared by every judge call of a session.

A 429 or 529 with `retry-after` pauses every worker until then, not only the one that got it;
the `anthropic-ratelimit-*` headers of each reply pace calls before the limit is hit. Time spent
waiting here is not counted against a question's time limit (see QuestionClock).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime

log = logging.getLogger(__name__)

# The clock of the question whose call is running: Judge.ask sets it, and asyncio copies it into each sample's task.
question_clock: ContextVar[QuestionClock | None] = ContextVar("question_clock", default=None)

KINDS = ("requests", "tokens", "input-tokens", "output-tokens")


class QuestionClock:
    """A question's time limit that stands still while any of its calls waits on the shared limiter."""

    def __init__(self, timeout: asyncio.Timeout) -> None:
        self.timeout = timeout
        self.waiting = 0
        self.left: float | None = None

    def stop(self) -> None:
        """One more of the question's calls waits: the limit stands still from the first."""
        if self.waiting == 0:
            when = self.timeout.when()
            self.left = None if when is None else when - asyncio.get_running_loop().time()
            _reschedule(self.timeout, None)
        self.waiting += 1

    def go(self) -> None:
        """One call waits no more: the limit runs again, from where it stood, once none waits."""
        self.waiting -= 1
        if self.waiting == 0 and self.left is not None:
            _reschedule(self.timeout, asyncio.get_running_loop().time() + self.left)


def _reschedule(timeout: asyncio.Timeout, when: float | None) -> None:
    try:
        timeout.reschedule(when)
    except RuntimeError:
        # already expired: its cancellation is on the way
        pass


class RateLimiter:
    """Holds every call of a session back while the server asked for a pause or a limit is nearly spent."""

    def __init__(self, concurrency: int, max_tokens: int, max_wait_s: float) -> None:
        self.concurrency, self.max_tokens, self.max_wait_s = concurrency, max_tokens, max_wait_s
        # time.monotonic() before which no call starts
        self.until = 0.0
        # how many pauses began (each logged once)
        self.pauses = 0
        self.waited_s = 0.0

    def pause(self, seconds: float, why: str) -> None:
        """No call starts for `seconds` (capped at judge.backoff_max_s); one log line however many workers ask."""
        seconds = min(max(seconds, 0.0), self.max_wait_s)
        if seconds <= 0:
            return
        now = time.monotonic()
        # a new pause; extending one already in force says nothing more
        if now >= self.until:
            self.pauses += 1
            log.warning("rate limit: every judge call waits %.1fs (%s)", seconds, why)
        self.until = max(self.until, now + seconds)

    def pause_for(self, status: int, headers: Mapping[str, str]) -> bool:
        """A 429 or 529 with `retry-after` pauses every call until then; True when it did (the limiter logged it)."""
        after = retry_after(headers)
        if after is None or status not in (429, 529):
            return False
        self.pause(after, f"HTTP {status}, retry-after {after:g}")
        return True

    def observe(self, headers: Mapping[str, str]) -> None:
        """Pace on a reply's anthropic-ratelimit-* headers: when one kind is nearly spent, wait for its reset."""
        for kind in KINDS:
            remaining = _number(headers.get(f"anthropic-ratelimit-{kind}-remaining"))
            reset = headers.get(f"anthropic-ratelimit-{kind}-reset")
            if remaining is None or not reset:
                continue
            # the calls in flight may still spend this much before any of them reports again
            floor = self.concurrency if kind == "requests" else self.concurrency * self.max_tokens
            if remaining < floor:
                wait = _seconds_until(reset)
                if wait:
                    self.pause(wait, f"{kind} remaining {remaining:g}, reset at {reset}")

    async def wait(self) -> None:
        """Return when calls may start; the current question's time limit stands still meanwhile."""
        clock = question_clock.get()
        while (left := self.until - time.monotonic()) > 0:
            if clock:
                clock.stop()
            started = time.monotonic()
            try:
                await asyncio.sleep(left)
            finally:
                self.waited_s += time.monotonic() - started
                if clock:
                    clock.go()


def _number(value: str | None) -> float | None:
    """A header's number, or None when absent or not a number."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _seconds_until(stamp: str) -> float | None:
    """Seconds from now until an RFC 3339 time, or None when it is not one."""
    try:
        when = datetime.fromisoformat(stamp.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """A `retry-after` header in seconds (0 is 0), or None when absent or an HTTP date we do not read."""
    return _number(headers.get("retry-after")) if headers is not None else None
