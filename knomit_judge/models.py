"""The models a session calls: their lifecycle and capabilities from the Models API, and the dialect each accepts.

Each session reads every model its config names (`GET /v1/models/{id}`), kept a day in the db's `models` table
(derived state: a lost row is read again, never bought). A retired or unknown model stops the session before
anything changes, naming the newest active model of its line; a deprecated one works, and its retirement date
goes into the session's notes, `status` and the metrics. A Models API that does not answer never stops a
session: it goes on with what it knew.

The request is built from the capabilities, never from the model's name (docs/real-api.md):
- structured outputs (`output_config.format`) where the model has them: they hold with thinking on;
- else a forced tool, with thinking turned off, where the model accepts `thinking: disabled`;
- else a plain request whose text reply the strict parser reads (what every model accepts).
`output_config.effort` only where the model lists the level; never temperature, top_p, top_k nor a prefill.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .config import CONFIG_FILE, EFFORTS, Config, Effort
from .errors import ConfigError
from .jsonl import dumps

# for annotations: at run time only a session that calls the API imports it (start-up time)
if TYPE_CHECKING:
    import anthropic
    from anthropic.types import OutputConfigParam, ToolParam
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

log = logging.getLogger(__name__)

# how long a model's lifecycle and capabilities are taken as read
KEEP = timedelta(days=1)
# the Models API is one small GET: a session does not wait longer for it
TIMEOUT_S = 20.0
# Output tokens a thinking model is given for its thinking, over the answer's judge.max_tokens, by effort; and
# what the dry run and the caps expect it to spend before a session has measured it (docs/real-api.md).
THINKING_ROOM = {"low": 4_000, "medium": 8_000, "high": 16_000, "xhigh": 32_000, "max": 64_000}
THINKING_EXPECTED = {"low": 300, "medium": 1_000, "high": 2_500, "xhigh": 5_000, "max": 10_000}
# output_config.effort by config.EFFORTS' names (a level read from a model is one)
LEVELS: dict[str, Effort] = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}


@dataclass
class ModelInfo:
    """What the Models API says of one model. `capabilities` False: it listed none (an API of 2025)."""

    id: str
    # active | deprecated | retired
    lifecycle: str
    line: str | None = None
    # ISO 8601 UTC, when a retirement is scheduled
    retires_at: str | None = None
    structured: bool = False
    thinking: list[str] = field(default_factory=list)  # accepted thinking.type values
    efforts: list[str] = field(default_factory=list)  # accepted output_config.effort levels
    max_tokens: int | None = None
    capabilities: bool = True
    fetched_at: str = ""

    @classmethod
    def of(cls, m: object) -> ModelInfo:
        """From the SDK's ModelInfo (built from whatever JSON came back, so read defensively); NotAModel when the
        answer names no model (a proxy's HTML page comes back as a str, `{}` as a ModelInfo without an id)."""
        model_id = getattr(m, "id", None)
        if not isinstance(model_id, str) or not model_id:
            raise NotAModel("a page of text" if isinstance(m, str) else "no model id in the answer")
        caps = getattr(m, "capabilities", None)

        def ok(capability: object) -> bool:
            return bool(getattr(capability, "supported", False))

        thinking = getattr(getattr(caps, "thinking", None), "types", None)
        effort = getattr(caps, "effort", None)
        retires = getattr(m, "retires_at", None)
        return cls(
            id=model_id,
            lifecycle=getattr(m, "lifecycle", None) or "active",
            line=getattr(m, "line", None),
            retires_at=retires.isoformat() if isinstance(retires, datetime) else retires,
            structured=ok(getattr(caps, "structured_outputs", None)),
            thinking=[
                t for t in ("adaptive", "enabled", "disabled", "between_tools") if ok(getattr(thinking, t, None))
            ],
            efforts=[e for e in EFFORTS if ok(effort) and ok(getattr(effort, e, None))],
            max_tokens=getattr(m, "max_tokens", None),
            capabilities=caps is not None,
            fetched_at=utc_now().isoformat(),
        )

    @property
    def thinks(self) -> bool:
        """Whether a request that omits `thinking` may come back with thinking. A model that lists adaptive thinking
        may think on its own (the 5.5 models do; claude-sonnet-4-6 does not, and is counted as if it might: a
        bound, not a bill); one that lists only `enabled` thinks only when a request asks with a budget, which
        ours never does; a model the API told us nothing about might."""
        return not self.capabilities or "adaptive" in self.thinking

    def retires(self) -> datetime | None:
        """The scheduled retirement, or None."""
        return _when(self.retires_at)


@dataclass(frozen=True)
class Dialect:
    """How one model is asked for a verdict: where the answer comes back, thinking, effort, room for both."""

    # "format": structured outputs; "tool": a forced tool with thinking off; "text": a plain request
    reply: str
    # thinking.type sent, or None (the model's own default)
    thinking: Literal["disabled"] | None = None
    effort: Effort | None = None  # output_config.effort sent, or None
    # whether this request may spend thinking tokens (max_tokens and estimates allow for it)
    thinks: bool = True
    max_tokens_cap: int | None = None
    # The effort thinking is counted at where none is sent (the model lists no level): judge.effort, never an
    # assumed "high" (docs/choices.md)
    counted: str = "low"

    def max_tokens(self, answer: int) -> int:
        """The request's max_tokens: the answer's, plus room for thinking at this effort when it may think."""
        total = answer + (THINKING_ROOM[self.effort or self.counted] if self.thinks else 0)
        return min(total, self.max_tokens_cap) if self.max_tokens_cap else total

    def expected_out(self, answer: int) -> int:
        """Output tokens a call is expected to bill: the answer's, and thinking at this effort (an assumption)."""
        return answer + (THINKING_EXPECTED[self.effort or self.counted] if self.thinks else 0)

    def shape(self, contract: dict[str, Any] | None) -> dict[str, Any] | None:
        """What of the request depends on the reply contract (it goes into the reply-cache key)."""
        if contract is None or self.reply == "text":
            return None
        if self.reply == "tool":
            # the forced tool, as keyed before dialects existed
            return contract
        return {"format": format_schema(contract["input_schema"])}

    def params(
        self, body: MessageCreateParamsNonStreaming, contract: dict[str, Any] | None
    ) -> MessageCreateParamsNonStreaming:
        """The Messages request `body` in this dialect, asking for `contract` ({name, description, input_schema},
        prompts.Prompt.tool) if given."""
        output: OutputConfigParam = {}
        if contract is not None and self.reply == "tool":
            tool: ToolParam = {
                "name": contract["name"],
                "description": contract["description"],
                "input_schema": contract["input_schema"],
            }
            body["tools"] = [tool]
            body["tool_choice"] = {"type": "tool", "name": contract["name"]}
        elif contract is not None and self.reply == "format":
            output["format"] = {"type": "json_schema", "schema": format_schema(contract["input_schema"])}
        if self.effort:
            output["effort"] = self.effort
        if output:
            body["output_config"] = output
        if self.thinking:
            body["thinking"] = {"type": self.thinking}
        return body


def dialect(info: ModelInfo | None, effort: str) -> Dialect:
    """The dialect a model accepts, from its capabilities (None: not known, so the plain request: no optional
    parameter, the text reply parsed strictly). Whether the request thinks follows what it sends: thinking
    `disabled` never does; omitted, the model's default (ModelInfo.thinks)."""
    if info is None or not info.capabilities:
        return Dialect("text", counted=effort)
    level = nearest(effort, info.efforts)
    if info.structured:
        return Dialect("format", None, level, info.thinks, info.max_tokens, effort)
    # a tool can be forced only while the model does not think
    if "disabled" in info.thinking:
        return Dialect("tool", "disabled", level, False, info.max_tokens, effort)
    return Dialect("text", None, level, info.thinks, info.max_tokens, effort)


def nearest(effort: str, levels: list[str]) -> Effort | None:
    """`effort` if the model takes it, else the nearest level it takes (the lower on a tie); None if it takes none."""
    if not levels:
        return None
    want = EFFORTS.index(effort)
    return LEVELS[min(levels, key=lambda e: (abs(EFFORTS.index(e) - want), EFFORTS.index(e)))]


_UNSUPPORTED = ("if", "then", "else", "not", "allOf", "oneOf")


def format_schema(schema: Any) -> Any:
    """A reply contract as structured outputs take it: without the keywords they refuse (if/then/else: the
    parser still enforces what they say), every object closed."""
    if isinstance(schema, list):
        return [format_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: format_schema(v) for k, v in schema.items() if k not in _UNSUPPORTED}
    kind = out.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind):
        out["additionalProperties"] = False
    return out


# -- the Models API, read each session -------------------------------------------------------------------------
def utc_now() -> datetime:
    return datetime.now(UTC)


def _when(iso: str | None) -> datetime | None:
    """An ISO 8601 time as an aware datetime (UTC when it names no zone); None when absent or unreadable."""
    if not iso:
        return None
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


class ModelsUnknown(Exception):
    """The Models API does not know this model (404)."""


class NotAModel(ValueError):
    """A 200 from the Models API that is not a model: taken as no answer."""


@dataclass
class Lineup:
    """The models a session calls, as read this session: their info, dialects, and what to say of them."""

    # model -> info (None: never read)
    infos: dict[str, ModelInfo | None] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # config key -> model
    notes: list[str] = field(default_factory=list)
    # a retired or unknown model: the session must not start
    problem: str | None = None
    # None: nothing to read again
    catalogue: Catalogue | None = field(default=None, repr=False, compare=False)
    config: Config | None = field(default=None, repr=False, compare=False)
    # every model read from the Models API this session (confirm())
    confirmed: bool = False
    # the models a problem names (retired, unknown): said once, so
    stopping: set[str] = field(default_factory=set)
    # no other cause (a price) is said of them

    def dialect(self, model: str, effort: str) -> Dialect:
        """How `model` is asked at `effort`, from what was read of it (the plain dialect when nothing was)."""
        return dialect(self.infos.get(model), effort)

    def read(self, key: str, model: str, fresh: bool = False) -> str | None:
        """Read one model into `infos`; the problem that stops a session (retired, unknown), or None."""
        # a lineup of nothing read (the plain dialect for every model)
        if self.catalogue is None:
            return None
        try:
            info = self.catalogue.info(model, fresh)
        except ModelsUnknown:
            self.infos[model] = None
            self.stopping.add(model)
            return (
                f"{key} {model!r} is unknown to the Models API: no request naming it can succeed; "
                f"{self._replacement(self.catalogue, key, None)}"
            )
        self.infos[model] = info
        if info is not None and info.lifecycle == "retired":
            self.stopping.add(model)
            retires = info.retires()
            day = retires.date().isoformat() if retires else "a date the API did not give"
            return (
                f"{key} {model!r} is retired (since {day}): no request naming it can succeed; "
                f"{self._replacement(self.catalogue, key, info.line)}"
            )
        return None

    def _replacement(self, catalogue: Catalogue, key: str, line: str | None) -> str:
        """What to set instead of a model that is gone: the newest active one of its line, where known."""
        where = self.config.where(key) if self.config else CONFIG_FILE
        newest = catalogue.newest_active(line)
        if newest:
            return f"the newest active {line} model is {newest!r}: set it in {where} (docs/real-api.md)"
        return f"name a current model in {where} (docs/real-api.md lists them)"

    def confirm(self) -> None:
        """Before a session's first change: each model kept from an earlier read is read again now (one free GET),
        so a retirement since then stops the session before it changes anything (ConfigError, exit 2). A Models
        API that does not answer changes nothing: only an answer that says a model is gone stops a session."""
        if self.confirmed or self.catalogue is None:
            return
        self.confirmed = True
        for key, model in self.keys.items():
            if model not in self.catalogue.read_now and (problem := self.read(key, model, fresh=True)):
                self.problem = problem
                raise ConfigError(problem)

    def gone(self, model: str) -> str | None:
        """After Messages answered 404 naming `model`: read it again at once; what to say if it is retired or
        unknown (the kept row now says so, for `status` and the next session), else None."""
        key = next((k for k, m in self.keys.items() if m == model), None)
        if key is None or self.catalogue is None:
            return None
        self.problem = self.read(key, model, fresh=True) or self.problem
        return self.problem


class ModelMemory(Protocol):
    """Where a Catalogue keeps what it read (the db's `models` table: store.Store, which sits above this module)."""

    def model_info(self, model: str) -> ModelInfo | None: ...
    def put_model_info(self, info: ModelInfo) -> None: ...


class Catalogue:
    """The Models API behind one sync client, with the db's `models` table as its day-long memory."""

    def __init__(self, store: ModelMemory, offline: bool = False) -> None:
        self.store = store
        # made at the first read: only a session that asks needs it
        self.client: anthropic.Anthropic | None = None
        # why the API did not answer
        self.failed: str | None = "not asked: no API key" if offline else None
        # models the Models API answered for in this session
        self.read_now: set[str] = set()

    def _client(self) -> anthropic.Anthropic:
        if self.client is None:
            # only for a session that calls the API
            import anthropic

            self.client = anthropic.Anthropic(max_retries=1, timeout=TIMEOUT_S)
        return self.client

    def info(self, model: str, fresh: bool = False) -> ModelInfo | None:
        """The model's info: as kept when read less than a day ago (unless `fresh`), else read now; when the API
        does not answer, as last kept (however old), or None. Raises ModelsUnknown on a 404."""
        kept = self.store.model_info(model)
        retires = kept.retires() if kept is not None else None
        if (
            kept is not None
            and not fresh
            and utc_now() - (_when(kept.fetched_at) or utc_now() - KEEP) < KEEP
            and not (retires and retires <= utc_now())
        ):  # a retirement day passed: read it again
            return kept
        if self.failed:
            return kept
        import anthropic

        try:
            read = ModelInfo.of(self._client().models.retrieve(model))
        except anthropic.NotFoundError:
            raise ModelsUnknown(model) from None
        # down, timed out, refused, or a body that is no model
        except (anthropic.APIError, ValueError) as e:
            self.failed = _why(e)
            return kept
        # kept under the name the config gives, which is what the next session looks up
        read.id = model
        self.store.put_model_info(read)
        self.read_now.add(model)
        return read

    def newest_active(self, line: str | None) -> str | None:
        """The newest active model of `line` by created_at (whatever order the API lists them in), or None."""
        if line is None or self.failed:
            return None
        import anthropic

        try:
            found = [
                m
                for m in self._client().models.list(limit=100)
                if getattr(m, "line", None) == line
                and getattr(m, "lifecycle", None) == "active"
                and isinstance(getattr(m, "id", None), str)
            ]
        # AttributeError: a page of text
        except (anthropic.APIError, ValueError, AttributeError, TypeError) as e:
            self.failed = _why(e)
            return None
        return max(found, key=_created).id if found else None


def _created(m: object) -> datetime:
    """When a listed model was created (the SDK's datetime, or its text), the oldest possible when unknown."""
    c = getattr(m, "created_at", None)
    when = c if isinstance(c, datetime) else _when(c) if isinstance(c, str) else None
    if when is None:
        return datetime.min.replace(tzinfo=UTC)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _why(e: Exception) -> str:
    """Why the Models API gave no answer, in a few words for the session's note."""
    code = getattr(e, "status_code", None)
    if isinstance(e, NotAModel):
        return f"not a model: {e}"
    if isinstance(e, (AttributeError, TypeError)):
        return "not a model list"
    return f"HTTP {code}" if code else type(e).__name__


def has_key() -> bool:
    """Whether the SDK has a credential to send (it reads these two itself)."""
    return bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))


def read_lineup(config: Config, store: ModelMemory, offline: bool = False) -> Lineup:
    """Read every model the config names; a retired or unknown one is the Lineup's `problem` (exit 2).

    `offline` (a dry run without a key): only what the db kept is read."""
    catalogue = Catalogue(store, offline)
    out = Lineup(keys=config.models(), catalogue=catalogue, config=config)
    for key, model in out.keys.items():
        if model in out.infos:
            continue
        problem = out.read(key, model)
        # the first one found is what the session says
        out.problem = out.problem or problem
        info = out.infos[model]
        if info is not None and info.lifecycle == "deprecated":
            out.notes.append(deprecation_note(key, info, catalogue.newest_active(info.line), config.where(key)))
    if note := dearer_reader(config):
        out.notes.append(note)
    # a dry run without a key plans from what was kept, as it says nothing
    if catalogue.failed and not offline:
        known = [m for m, i in out.infos.items() if i is not None]
        out.notes.append(
            f"the Models API did not answer ({catalogue.failed}): going on with what was known "
            + (
                f"of {', '.join(known)}"
                if known
                else "(nothing: each model is asked in the plain dialect every model accepts)"
            )
        )
    return out


def dearer_reader(config: Config) -> str | None:
    """A first reader that costs more than the judge model it reads for, said naming both: it exists to save the
    judge model's reading, so there it only adds cost. Compared on a call of 1,000 tokens in and 100 out."""
    reader = config.models().get("judge.first_reader")
    mine, theirs = (config.price(reader) if reader else None), config.price(config.judge.model)
    if mine is None or theirs is None or mine.usd(1_000, 100) <= theirs.usd(1_000, 100):
        return None
    return (
        f"judge.first_reader {reader!r} costs more than judge.model {config.judge.model!r} "
        f"(${mine.input_per_mtok:g} / ${mine.output_per_mtok:g} against ${theirs.input_per_mtok:g} / "
        f"${theirs.output_per_mtok:g} per million tokens in / out): it reads every question first to save the "
        f'judge model\'s reading, so here it only adds cost; name a cheaper first reader, or "" to read with '
        f"{config.judge.model!r} alone, in {config.where('judge.first_reader')}"
    )


def deprecation_note(key: str, info: ModelInfo, replacement: str | None, where: str = CONFIG_FILE) -> str:
    """What a session says of a deprecated model: the day it retires, and what to set instead."""
    when = info.retires()
    days = f" ({(when - utc_now()).days} days from now)" if when and when > utc_now() else " (overdue)" if when else ""
    day = when.date().isoformat() if when else "no date scheduled yet"
    return (
        f"{key} {info.id!r} is deprecated: it retires on {day}{days}"
        + (f"; the newest active {info.line} is {replacement!r}" if replacement else "")
        + f"; set it in {where} before then (docs/real-api.md)"
    )


def require_callable(config: Config, store: ModelMemory) -> Lineup:
    """The lineup, or ConfigError (exit 2) for a retired or unknown model: called before a session changes
    anything."""
    found = read_lineup(config, store)
    if found.problem:
        raise ConfigError(found.problem)
    return found


def require_usable(config: Config, store: ModelMemory) -> Lineup:
    """The lineup, or ConfigError (exit 2): a retired or unknown model first, then a model with no price, so a
    retired model (which has no price) is named for what it is, one cause."""
    found = require_callable(config, store)
    config.require_prices()
    return found


def kept_lifecycles(config: Config, store: ModelMemory) -> list[dict[str, Any]]:
    """Each model the config names, its lifecycle as the last read kept it (no API call): for `status` and the
    metrics."""
    out = []
    for key, model in config.models().items():
        info = store.model_info(model)
        out.append(
            {
                "key": key,
                "model": model,
                "lifecycle": info.lifecycle if info else None,
                "retires_at": info.retires_at if info else None,
                "line": info.line if info else None,
                "read_at": info.fetched_at if info else None,
            }
        )
    return out


def status_lines(models: list[dict[str, Any]]) -> list[str]:
    """`status`'s line per model: its lifecycle, and the day it retires when one is scheduled."""
    lines = []
    for m in models:
        if m["lifecycle"] is None:
            lines.append(f"{m['key']} {m['model']}: lifecycle not read yet (the next session reads it)")
            continue
        when = _when(m["retires_at"])
        tail = f", retires on {when.date().isoformat()} ({(when - utc_now()).days} days)" if when else ""
        lines.append(f"{m['key']} {m['model']}: {m['lifecycle']}{tail} (read {m['read_at'][:10]})")
    return lines


def info_json(info: ModelInfo) -> str:
    """A ModelInfo as the `models` table keeps it."""
    return dumps(asdict(info), sort_keys=True)


def info_from_json(text: str) -> ModelInfo | None:
    """A kept ModelInfo read back; None when the row does not read (it is read again from the API)."""
    try:
        data = json.loads(text)
        return ModelInfo(**{k: v for k, v in data.items() if k in ModelInfo.__dataclass_fields__})
    except (ValueError, TypeError):
        return None
