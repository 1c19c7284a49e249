"""Message Batches: a session's offered questions bought at the batch price, collected by a later session.

`review --batch` (or `[judge] mode = "batch"`) gathers the requests its offered questions need now (each
sample of the first order, and of the second for questions in the swap sample; with a first reader, its one
order, the judge model reading its yeses and the audits once that reply is in) and submits them as
one Message Batch after its rounds. A batch is bought once: its requests are stored as a pending submission
(their custom ids, the time) before the create call is made, and the batch id replaces the marker when the
call returns. A session killed during the call (SIGTERM), or a call whose answer never came back, leaves
the marker: the next session finds the batch in the API's batch list (made since the marker, with as many
requests) and collects it, or, when the API has none, asks its questions again. Every later session (batch mode or not, and the daemon)
first collects finished batches: each result goes where a synchronous reply would (parsed, into the
reply cache, then judged, journalled and applied as usual), so the decisions land in that session.
A batch still running is reported and its questions are never asked again meanwhile; an ended batch whose
results are gone (`results_url: null`: archived) is lost, and its questions are asked again. A collected
question whose first order did not give the default needs its second order: a batch session gathers
that into its own batch (the question is judged once both are in), a synchronous one asks it at once.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .config import Config
from .errors import ConfigError, JudgeRefused, Refused, Unavailable, Unparsed
from .jsonl import dumps
from .judge import Judge, JudgedCandidate, JudgedPass, JudgeSpec
from .store import Store
from .transport import REFUSAL, STOPS_SESSION, AnthropicBackend, completion, error_message, status_retryable
from .verdicts import now_text

# for annotations: at run time only a session with batches imports it (start-up time)
if TYPE_CHECKING:
    import anthropic
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse

log = logging.getLogger(__name__)

# The API takes up to 100,000 requests or 256 MB a batch; larger sessions submit more than one.
MAX_REQUESTS = 50_000
MAX_BYTES = 200_000_000
# Requests the API refused for their content, as in a synchronous call (see AnthropicBackend.complete).
REFUSED_TYPES = ("invalid_request_error", "request_too_large")
# Estimated reply length for the cost cap at submission (replies are one short JSON object).
REPLY_TOKENS = 100
# A submission recorded before its create call returns: its id is ours (PENDING_PREFIX...) until the API's is known.
PENDING = "pending"
PENDING_PREFIX = "pending-"
# batches whose questions are bought, or may be: never asked again meanwhile
OPEN = ("submitted", PENDING)
# How much earlier than the marker's own time the API's clock may put the batch it made (a clock set wrong here).
CLOCK_SKEW = timedelta(hours=1)
# batches a page of the API's list, newest first
LIST_PAGE = 100


@dataclass
class BatchRequest:
    """One request of a Message Batch, and the question it asks."""

    custom_id: str  # the request's reply-cache key
    pass_name: str
    fingerprint: str
    prompt: str
    params: MessageCreateParamsNonStreaming
    # which order of the question this request asks
    position: int = 0
    # the model asked: the judge model, or the first reader
    model: str = ""


@dataclass
class Batches:
    """What one session does with Message Batches: collect finished ones, gather new requests, submit."""

    store: Store
    session: str
    # this session's offered questions go into a batch (review --batch, judge.mode = "batch")
    submitting: bool
    gathered: dict[str, BatchRequest] = field(default_factory=dict)
    gathered_fps: dict[str, set[str]] = field(default_factory=dict)
    # pass -> fingerprints with results this session
    collected: dict[str, set[str]] = field(default_factory=dict)
    # what the gathered requests should cost, for judge.max_cost_usd
    estimated_usd: float = 0.0
    # {"id", "requests", "status"} for the session's output (a collected batch adds a count per result kind)
    reports: list[dict[str, Any]] = field(default_factory=list)

    # -- the db ---------------------------------------------------------------------------------------
    def open_batches(self, status: str = "submitted") -> list[dict[str, Any]]:
        """The batches submitted (or, given PENDING, whose create call never returned) and not yet collected,
        oldest first: {"id", "requests", "submitted_at"}."""
        return [
            dict(id=r[0], requests=r[1], submitted_at=r[2])
            for r in self.store.db.execute(
                "SELECT id, requests, submitted_at FROM batches WHERE status = ? ORDER BY submitted_at, id", [status]
            )
        ]

    def unsettled(self) -> bool:
        """Whether a batch waits to be collected, or a submission to be found in the API's list."""
        return bool(self.open_batches() or self.open_batches(PENDING))

    def waiting(self, pass_name: str) -> dict[str, set[str]]:
        """Batch id -> this pass's fingerprints in it, for batches not yet collected (and pending submissions)."""
        out: dict[str, set[str]] = {}
        for batch_id, fp in self.store.db.execute(
            "SELECT r.batch_id, r.fingerprint FROM batch_requests r JOIN batches b ON b.id = r.batch_id "
            f"WHERE b.status IN ({', '.join('?' for _ in OPEN)}) AND r.pass = ?",
            [*OPEN, pass_name],
        ):
            out.setdefault(batch_id, set()).add(fp)
        return out

    def requests_in(self, batch_id: str, pass_name: str) -> int:
        """How many of a batch's requests ask this pass's questions."""
        return self.store.db.execute(
            "SELECT count(*) FROM batch_requests WHERE batch_id = ? AND pass = ?", [batch_id, pass_name]
        ).fetchone()[0]

    def busy(self, pass_name: str) -> set[str]:
        """Fingerprints not to ask now: in a running batch, or gathered for this session's batch."""
        return set().union(*self.waiting(pass_name).values(), self.gathered_fps.get(pass_name, set()))

    def take_paid(self, pass_name: str, fingerprints: set[str]) -> set[str]:
        """Of these questions, those whose batch results came in this session (each taken once).

        They are judged whatever the budget or the cost cap says: they are paid for already.
        """
        paid = self.collected.get(pass_name, set()) & fingerprints
        self.collected[pass_name] = self.collected.get(pass_name, set()) - paid
        return paid

    # -- collecting -----------------------------------------------------------------------------------
    async def collect(self, judge: Judge, passes: Mapping[str, JudgedPass]) -> None:
        """Take in every finished batch: results into the reply cache (and judge.fresh), spend into the ledgers."""
        # only with batches to collect: see transport.AnthropicBackend
        import anthropic

        if not self.unsettled():
            return
        if not isinstance(judge.backend, AnthropicBackend):
            log.warning(
                "%d batch(es) not collected: collecting needs --judge anthropic",
                len(self.open_batches()) + len(self.open_batches(PENDING)),
            )
            return
        client = judge.backend.client
        if pending := self.open_batches(PENDING):
            await self._find_pending(client, pending)
        for row in self.open_batches():
            try:
                batch = await client.messages.batches.retrieve(row["id"])
            except anthropic.APIStatusError as e:
                if e.status_code == 404:
                    self._lost(row, "the API does not know it (HTTP 404)")
                    continue
                if e.status_code in STOPS_SESSION:
                    raise JudgeRefused(
                        f"judge refused the batch request: HTTP {e.status_code} {error_message(e)}; "
                        "check ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL"
                    ) from None
                log.warning(
                    "batch %s: not collected (HTTP %d %s); tried again next session",
                    row["id"],
                    e.status_code,
                    error_message(e),
                )
                continue
            except anthropic.APIConnectionError as e:
                log.warning("batch %s: not collected (%s); tried again next session", row["id"], type(e).__name__)
                continue
            if batch.processing_status != "ended":
                self.reports.append({"id": row["id"], "requests": row["requests"], "status": "waiting"})
                continue
            # ended, and its results are gone (archived): they will never come
            if not batch.results_url:
                self._lost(
                    row,
                    "it ended without results (results_url null: archived"
                    f"{' at ' + batch.archived_at.isoformat() if batch.archived_at else ''})",
                )
                continue
            await self._take(client, row, judge, passes)

    async def _find_pending(self, client: anthropic.AsyncAnthropic, pending: list[dict[str, Any]]) -> None:
        """Match each pending submission to the batch it made, in the API's list: one made since the marker
        (less CLOCK_SKEW), with as many requests, that no row of ours names; none there: it was never made.

        The list (newest first) is read back to the oldest marker's time. A batch matched here whose results
        turn out not to be our requests is lost when collected (`_take`), so a wrong match buys nothing twice.
        """
        import anthropic

        known = {r[0] for r in self.store.db.execute("SELECT id FROM batches")}
        oldest = min(_when(row["submitted_at"]) for row in pending) - CLOCK_SKEW
        made: list[MessageBatch] = []
        try:
            async for batch in client.messages.batches.list(limit=LIST_PAGE):
                if batch.created_at < oldest:
                    break
                if batch.id not in known:
                    made.append(batch)
        except anthropic.APIStatusError as e:
            if e.status_code in STOPS_SESSION:
                raise JudgeRefused(
                    f"judge refused the batch list: HTTP {e.status_code} {error_message(e)}; "
                    "check ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL"
                ) from None
            log.warning(
                "%d batch submission(s) not looked up (HTTP %d %s); their questions wait, tried again next session",
                len(pending),
                e.status_code,
                error_message(e),
            )
            return
        except anthropic.APIConnectionError as e:
            log.warning(
                "%d batch submission(s) not looked up (%s); their questions wait, tried again next session",
                len(pending),
                type(e).__name__,
            )
            return
        for row in pending:
            at = _when(row["submitted_at"])
            # of the batches of its size made since (less the skew), the one made nearest its own time
            match = min(
                (b for b in made if b.created_at >= at - CLOCK_SKEW and _size(b) == row["requests"]),
                key=lambda b: abs(b.created_at - at),
                default=None,
            )
            if match is None:
                self._lost(
                    row,
                    "its submission was cut short before the API made it (no batch of its "
                    f"{row['requests']} requests in the API's list since {row['submitted_at']})",
                    status="not submitted",
                )
                continue
            made.remove(match)
            self._adopt(row["id"], match.id)
            log.info(
                "batch %s: found in the API's list, made by a submission cut short (%d requests)",
                match.id,
                row["requests"],
            )

    async def _take(
        self, client: anthropic.AsyncAnthropic, row: dict[str, Any], judge: Judge, passes: Mapping[str, JudgedPass]
    ) -> None:
        """File one ended batch's results, then mark it collected (a cut-short read is tried again next session)."""
        import anthropic

        requests = {
            r[0]: (r[1], r[2], r[3])
            for r in self.store.db.execute(
                "SELECT custom_id, pass, fingerprint, model FROM batch_requests WHERE batch_id = ?", [row["id"]]
            )
        }
        kinds: dict[str, int] = {}
        # results of requests that are not ours: a batch matched to a pending submission wrongly
        foreign = 0
        try:
            results = await client.messages.batches.results(row["id"])
            async for entry in results:
                if entry.custom_id not in requests:
                    foreign += 1
                    continue
                pass_name, fp, model = requests[entry.custom_id]
                p = passes.get(pass_name)
                if p is None:
                    continue
                # priced and cached as the model it asked (NULL: before 0022, the judge model alone)
                kind = self._result(entry, p, judge.reader(model) if model and model != judge.model else judge)
                kinds[kind] = kinds.get(kind, 0) + 1
                self.collected.setdefault(pass_name, set()).add(fp)
        except anthropic.NotFoundError:
            self._lost(row, "its results are no longer available (HTTP 404)")
            return
        except (anthropic.APIError, ValueError) as e:
            # what came in is in the reply cache already; the rest is fetched again next session
            log.warning("batch %s: results cut short (%s); tried again next session", row["id"], type(e).__name__)
            return
        # the SDK's own: no results_url (gone since it was retrieved)
        except anthropic.AnthropicError as e:
            self._lost(row, f"its results cannot be had ({e})")
            return
        if foreign and not kinds:
            self._lost(row, f"its {foreign} results are not this corpus's requests")
            return
        with self.store.db.atomic():
            self.store.db.execute(
                "UPDATE batches SET status = 'collected', collected_at = ? WHERE id = ?", [now_text(), row["id"]]
            )
        self.reports.append({"id": row["id"], "requests": row["requests"], "status": "collected", **kinds})
        log.info(
            "batch %s: collected %d result(s) (%s)",
            row["id"],
            sum(kinds.values()),
            ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())),
        )

    def position_of(self, key: str) -> int | None:
        """Which order a batch request asked, as recorded when it was gathered (None: before orders were kept)."""
        row = self.store.db.execute("SELECT position FROM batch_requests WHERE custom_id = ? LIMIT 1", [key]).fetchone()
        return row[0] if row else None

    def _lost(self, row: dict[str, Any], why: str, status: str = "lost") -> None:
        """A batch that will never give results (or a submission that made none): its questions become askable
        again (next round or session)."""
        log.warning("batch %s: %s; its %d request(s) will be asked again", row["id"], why, row["requests"])
        with self.store.db.atomic():
            self.store.db.execute(
                "UPDATE batches SET status = 'lost', collected_at = ? WHERE id = ?", [now_text(), row["id"]]
            )
        self.reports.append({"id": row["id"], "requests": row["requests"], "status": status})

    def _adopt(self, marker: str, batch_id: str) -> None:
        """A pending submission's batch is known: its id replaces the marker, and it is collected as submitted."""
        with self.store.db.atomic():
            self.store.db.execute("UPDATE batch_requests SET batch_id = ? WHERE batch_id = ?", [batch_id, marker])
            self.store.db.execute("UPDATE batches SET id = ?, status = 'submitted' WHERE id = ?", [batch_id, marker])

    def _forget(self, marker: str) -> None:
        """A submission the API answered no to, every time: it made no batch, so its marker goes."""
        with self.store.db.atomic():
            self.store.db.execute("DELETE FROM batch_requests WHERE batch_id = ?", [marker])
            self.store.db.execute("DELETE FROM batches WHERE id = ?", [marker])

    def _result(self, entry: MessageBatchIndividualResponse, p: JudgedPass, judge: Judge) -> str:
        """One batch result, filed as a synchronous call's would be; returns its kind."""
        result, key = entry.result, entry.custom_id
        ledger = judge.ledger(p.name)
        if result.type == "succeeded":
            done = completion(result.message, judge.tool(p))
            if done is None:
                judge.fresh[key] = Unavailable("malformed batch result: not a Message", 1)
                # billed, for all we know
                ledger.add(1, 1, None, None, None, bound=judge.unknown_call_usd(batch=True))
                return "malformed"
            done.batch = True
            cost = judge.cost(done.tokens_in, done.tokens_out, batch=True)
            ledger.add(1, 1, done.tokens_in, done.tokens_out, cost, bound=judge.unknown_call_usd(batch=True))
            if done.stop_reason == "refusal":
                judge.fresh[key] = Refused(f"batch request: {REFUSAL}", 1)
                return "refused"
            try:
                p.parse(done.text)
            except Unparsed:
                # judged (as unparsed) like any reply; only parsed replies are cached
                pass
            else:
                judge.store.cache_reply(
                    key,
                    judge.model,
                    p.prompt.id,
                    done.text,
                    tokens_in=done.tokens_in,
                    tokens_out=done.tokens_out,
                    judge=judge.kind,
                    position=self.position_of(key),
                )
            judge.fresh[key] = done
            return "succeeded"
        # an errored or expired request is not billed
        ledger.add(1, 1, None, None, 0.0)
        if result.type == "errored":
            error = getattr(getattr(result, "error", None), "error", None)
            kind, message = getattr(error, "type", "api_error"), getattr(error, "message", "")
            if kind in REFUSED_TYPES:
                judge.fresh[key] = Refused(f"batch request {kind}: {message}", 1)
                return "refused"
            judge.fresh[key] = Unavailable(f"batch request errored ({kind}: {message})", 1)
            return "errored"
        judge.fresh[key] = Unavailable(f"batch request {result.type}", 1)
        return result.type  # expired, canceled

    # -- submitting -----------------------------------------------------------------------------------
    def gather(self, judge: Judge, p: JudgedPass, candidate: JudgedCandidate, one_order: bool = False) -> int:
        """Add the requests a question needs now and has no reply for to this session's batch; returns how many.

        `judge` may be the first reader (Judge.reader), which asks the first order only (`one_order`).
        A result collected this session (judge.fresh) is a reply, even one that failed: the question is
        judged from it, not asked again.
        """
        backend = _api(judge)
        added = 0
        for ask in judge.needed_asks(p, candidate):
            if one_order and ask.position != 0:
                continue
            if ask.key in self.gathered or ask.key in judge.fresh or judge.store.cached_reply(ask.key, judge.kind):
                continue
            params = backend.params(p.prompt.system, ask.user, judge.tool(p), model=judge.model)
            self.gathered[ask.key] = BatchRequest(
                ask.key, p.name, candidate.fingerprint, p.prompt.id, params, ask.position, judge.model
            )
            cost = judge.cost(
                (len(p.prompt.system) + len(ask.user)) // 4, judge.expected_out() or REPLY_TOKENS, batch=True
            )
            self.estimated_usd += cost or 0.0
            added += 1
        if added:
            self.gathered_fps.setdefault(p.name, set()).add(candidate.fingerprint)
        return added

    async def submit(self, judge: Judge) -> list[tuple[str | None, dict[str, set[str]], str]]:
        """Submit the gathered requests: (batch id or None, pass -> fingerprints, error) for each batch tried."""
        pending = list(self.gathered.values())
        self.gathered = {}
        made: list[tuple[str | None, dict[str, set[str]], str]] = []
        for chunk in _chunks(pending):
            per_pass: dict[str, set[str]] = {}
            for r in chunk:
                per_pass.setdefault(r.pass_name, set()).add(r.fingerprint)
            try:
                batch_id = await self._create(judge, chunk)
            except Unavailable as e:
                made.append((None, per_pass, str(e.args[0])))
                continue
            made.append((batch_id, per_pass, ""))
            self.reports.append({"id": batch_id, "requests": len(chunk), "status": "submitted"})
            log.info("batch %s: %d requests submitted", batch_id, len(chunk))
        return made

    async def _create(self, judge: Judge, chunk: list[BatchRequest]) -> str:
        """Submit one batch, with counted retries: stored as a pending submission before the call is made, so a
        session killed during it (or a call whose answer was lost) leaves the next session a batch to find in
        the API's list, never one to buy again."""
        import anthropic

        backend = _api(judge)
        cfg = judge.config.judge
        marker = self._pending(judge, chunk)
        # unanswered: an attempt whose outcome no answer told us
        last, batch, unanswered = "", None, False
        attempt = 0
        try:
            for attempt in range(1, cfg.max_attempts + 1):
                await backend.limiter.wait()
                if unanswered and (found := await self._made_since(backend.client, marker, len(chunk))):
                    # the lost answer's batch: made, so not made again
                    self._adopt(marker, found)
                    return found
                try:
                    batch = await backend.client.messages.batches.create(
                        requests=[{"custom_id": r.custom_id, "params": r.params} for r in chunk]
                    )
                    break
                except anthropic.APIStatusError as e:
                    if e.status_code in STOPS_SESSION:
                        raise JudgeRefused(
                            f"judge refused the batch: HTTP {e.status_code} {error_message(e)}; "
                            "check ANTHROPIC_API_KEY, the model name and ANTHROPIC_BASE_URL"
                        ) from None
                    last = f"HTTP {e.status_code} {error_message(e)}"
                    backend.limiter.pause_for(e.status_code, e.response.headers)
                    if not status_retryable(e.status_code):
                        # the batch as sent is refused: retrying cannot help; asked again next session
                        break
                except anthropic.APIConnectionError as e:
                    last, unanswered = type(e).__name__, True
                log.warning("batch submission failed (%s), attempt %d of %d", last, attempt, cfg.max_attempts)
                if attempt < cfg.max_attempts:
                    await asyncio.sleep(backend._wait(attempt))
        except JudgeRefused:
            if not unanswered:
                self._forget(marker)
            raise
        if batch is None:
            # every attempt was answered no: nothing was made
            if not unanswered:
                self._forget(marker)
                raise Unavailable(f"batch not submitted: {last} after {attempt} attempt(s)", attempt)
            raise Unavailable(
                f"batch not submitted: {last} after {attempt} attempt(s); an answer was lost, so the "
                "next session looks for it in the API's batch list before asking again",
                attempt,
            )
        self._adopt(marker, batch.id)
        return batch.id

    def _pending(self, judge: Judge, chunk: list[BatchRequest]) -> str:
        """Store a submission and its requests (custom ids) as pending, committed before the create call."""
        marker = f"{PENDING_PREFIX}{self.session}-{secrets.token_hex(4)}"
        with self.store.db.atomic():
            self.store.db.table("batches").insert(
                {
                    "id": marker,
                    "model": judge.model,
                    "session": self.session,
                    "requests": len(chunk),
                    "status": PENDING,
                    "submitted_at": now_text(),
                }
            )
            self.store.db.table("batch_requests").insert_all(
                (
                    {
                        "batch_id": marker,
                        "custom_id": r.custom_id,
                        "pass": r.pass_name,
                        "fingerprint": r.fingerprint,
                        "prompt": r.prompt,
                        "position": r.position,
                        "model": r.model,
                    }
                    for r in chunk
                ),
                batch_size=500,
            )
        return marker

    async def _made_since(self, client: anthropic.AsyncAnthropic, marker: str, size: int) -> str | None:
        """After an attempt whose answer was lost: the batch it made, if the API's list has one (else None)."""
        import anthropic

        since = (
            _when(self.store.db.execute("SELECT submitted_at FROM batches WHERE id = ?", [marker]).fetchone()[0])
            - CLOCK_SKEW
        )
        known = {r[0] for r in self.store.db.execute("SELECT id FROM batches")}
        try:
            async for batch in client.messages.batches.list(limit=LIST_PAGE):
                if batch.created_at < since:
                    return None
                if batch.id not in known and _size(batch) == size:
                    return batch.id
        except (anthropic.APIStatusError, anthropic.APIConnectionError):
            # not known: the next attempt's answer (or the next session) tells
            return None
        return None


def _when(stored: str) -> datetime:
    """A stored timestamp (verdicts.now_text) as an aware datetime."""
    return datetime.fromisoformat(stored)


def _size(batch: MessageBatch) -> int:
    """How many requests a batch holds, whatever became of them."""
    c = batch.request_counts
    return c.processing + c.succeeded + c.errored + c.canceled + c.expired


def _api(judge: Judge) -> AnthropicBackend:
    """The judge's backend, which only the real API can be when a session submits (batch_mode says so first)."""
    if not isinstance(judge.backend, AnthropicBackend):
        raise TypeError(f"Message Batches need the anthropic judge, not {judge.kind}")
    return judge.backend


def _chunks(requests: list[BatchRequest]) -> Iterator[list[BatchRequest]]:
    """The requests in batches the API takes: at most MAX_REQUESTS and about MAX_BYTES each."""
    chunk: list[BatchRequest] = []
    size = 0
    for r in requests:
        n = len(dumps(r.params, ensure_ascii=False).encode("utf-8")) + 200
        if chunk and (len(chunk) >= MAX_REQUESTS or size + n > MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(r)
        size += n
    if chunk:
        yield chunk


def batch_mode(options_batch: bool | None, config: Config, spec: JudgeSpec) -> bool:
    """Whether this session submits a batch: --batch, else judge.mode; only the real API has batches."""
    on = config.judge.mode == "batch" if options_batch is None else options_batch
    if on and not spec.anthropic:
        raise ConfigError(f'--batch / judge.mode = "batch" needs --judge anthropic, not {str(spec)!r}')
    return on
