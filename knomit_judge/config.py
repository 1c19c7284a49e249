"""knomit-judge.toml: every key typed and validated; the environment wins over the file."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from .cron import cron_trigger
from .errors import ConfigError
from .prices import DEFAULT_PRICES, Price, retired_model

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

CONFIG_FILE = "knomit-judge.toml"
ENVIRONMENT = {"judge.model": "KNOMIT_JUDGE_MODEL", "judge.first_reader": "KNOMIT_JUDGE_FIRST_READER"}  # win over it

# The keys that take one of a few words, as types (mypy catches a typo in the code) and as the choices a file is
# checked against (_CHOICES); in the file and the docs they are strings (WORDS: each by its annotation).
JudgeMode = Literal["sync", "batch"]
# output_config.effort as the Messages API types it
Effort = Literal["low", "medium", "high", "xhigh", "max"]
RetractMode = Literal["status", "delete"]
FrontMatter = Literal["required", "optional"]
ApplyMode = Literal["commit", "propose"]
MODES: tuple[JudgeMode, ...] = get_args(JudgeMode)
EFFORTS: tuple[Effort, ...] = get_args(Effort)
RETRACT_MODES: tuple[RetractMode, ...] = get_args(RetractMode)
FRONT_MATTER: tuple[FrontMatter, ...] = get_args(FrontMatter)
APPLY_MODES: tuple[ApplyMode, ...] = get_args(ApplyMode)


@dataclass
class JudgeConfig:
    model: str = "claude-sonnet-5-5"
    # How hard a thinking model thinks (output_config.effort, where the model takes it): low for a yes/no verdict
    # on short evidence (docs/choices.md). Thinking tokens are billed as output.
    effort: Effort = "low"
    # The cheapest current model reads every offered question first, in one order; its no is a verdict, its yes
    # goes to `model`, whose agreeing yes is the one that acts (session/readers.py). "" = off: `model` reads alone.
    first_reader: str = "claude-haiku-5-5"
    # Of each pass's first reads in a session, this share (and at least the top 2) of its no's are expected to be read
    # again by `model`, drawn by inclusion probability (audits.py): a yes there is a miss, counted and applied.
    audit_share: float = 0.03
    # The first reader's recall the audits hold it to (audits.py, docs/choices.md): it sets the floor's share of
    # the audits, and a window whose estimate falls below it suspends the first reader for the pass.
    first_reader_recall: float = 0.8
    concurrency: int = 4
    timeout_s: float = 600.0
    max_attempts: int = 3
    samples: int = 1
    min_agreement: float = 0.67
    position_swap: bool = True
    # share of questions whose first order gave the default still asked in both orders
    swap_sample: float = 0.1
    max_cost_usd: float = 5.0
    max_tokens: int = 400
    # first retry wait; doubles each attempt, with jitter
    backoff_s: float = 1.0
    backoff_max_s: float = 60.0
    # per fact body in prune and discovery; longer bodies are cut, visibly
    max_evidence_chars: int = 8000
    # "batch": offered questions go into one Message Batch, collected by the next session
    mode: JudgeMode = "sync"


@dataclass
class ShortlistConfig:
    k: int = 5


@dataclass
class DescribeConfig:
    # One line per motif spelling, written by the model from its carriers, nominates alias candidates
    # (session/lines.py). Off, the alias pass nominates from the embeddings alone.
    enabled: bool = True
    # A line only chooses what the judge looks at, so the cheapest current model writes it; "" = judge.model.
    model: str = "claude-haiku-5-5"
    batch: int = 85  # spellings per request
    carriers: int = 3  # carriers shown per spelling
    body_chars: int = 600  # of each carrier's body
    # Requests that may give a spelling no line (left out, a bad item, a reply that is not the contract's JSON,
    # a refusal) before it waits for its key to change: a bad reply is paid for a bounded number of times.
    max_tries: int = 3


@dataclass
class BudgetConfig:
    enabled: bool = True
    # A pass's balance is money (docs/throttle.md): it opens at opening_usd, each read withdraws what it cost at
    # its reader's price, each resolution deposits usd_per_resolution (also what the worth rule values one at).
    opening_usd: float = 0.05
    usd_per_resolution: float = 0.04
    probe_every: int = 5
    # Before the balance counted money: in judge-model questions, converted at QUESTION_TOKENS of judge.model.
    # 0 = not set (the USD keys hold); a file that sets them (every file init wrote before) means the same spend.
    optimistic_cap: int = 0
    questions_per_resolution: int = 0
    # questions owed to each fact or spelling changed since the pass's last session
    fresh_per_change: int = 2
    # Dollar caps over every session on the corpus, as users budget: a UTC day and a UTC calendar month.
    # A day holds one full session (judge.max_cost_usd), so the default daily schedule is never cut short,
    # while a tight cron or repeated runs cannot multiply it; a month holds ten such days.
    max_usd_per_day: float = 5.0
    max_usd_per_month: float = 50.0
    # Read before the balance replaced them (docs/budget): still accepted, so older files load; unused.
    window: int = 20
    patience: int = 8
    unproven_allowance: int = 4


@dataclass
class DiscoveryConfig:
    confidence: float = 0.4
    min_group: int = 3
    # real syntheses distil 2..9 facts; 8 holds 3 of most of them (docs/judges.md)
    max_group: int = 8
    # a fact's neighbours at least this close join its group (a floor, not a bar)
    group_similarity: float = 0.4
    # a proposed fact this close to an existing one is linked to it
    match_similarity: float = 0.85


@dataclass
class CorpusConfig:
    # globs relative to the corpus root
    paths: list[str] = field(default_factory=lambda: ["facts/**/*.md"])
    # front-matter list keys holding motifs
    motif_keys: list[str] = field(default_factory=lambda: ["motifs"])
    # "status": keep the file with status: retracted; "delete": remove it in the commit
    retract: RetractMode = "status"
    # "optional": a note without front matter is a fact too (a vault, a folder of notes: init writes it);
    # "required": such a file is reported and skipped, as knomit's own reader and our facts/ layout want.
    front_matter: FrontMatter = "required"
    # globs of files `paths` matches that are no facts: a vault's templates, drawings, an attachments folder
    exclude: list[str] = field(default_factory=list)
    # true: `#tags` in a note's body are motifs too, beside the motif keys (a vault's)
    inline_tags: bool = False
    max_fact_bytes: int = 1_048_576


@dataclass
class ScheduleConfig:
    cron: str = "0 3 * * *"


@dataclass
class MetricsConfig:
    # a Prometheus textfile-collector file written after every session; "" writes none
    textfile: str = ""


@dataclass
class GitConfig:
    # a configured git remote; "" keeps the session local: nothing is fetched or pushed
    remote: str = ""
    # the remote branch a session merges before reviewing and pushes to after
    branch: str = "main"


@dataclass
class ApplyConfig:
    # "commit": a session commits its decisions on the branch it reviews (and pushes it, with [git] remote).
    # "propose": it commits them on the proposals branch and pushes that one; `approve` lands them (proposals.py).
    mode: ApplyMode = "commit"
    # the branch a proposing session commits to, never the reviewed one
    proposals: str = "knomit-judge/proposals"


@dataclass
class CalibrationConfig:
    # One applied decision in ten per pass and session goes to the inbox (at least one when the pass applied
    # anything): a person dropping by sees a few items per session, and the labels stay a random sample.
    sample_rate: float = 0.1
    # Probation when even the top of the 95% interval is below this: the labels then show that more than
    # 3 in 10 applied decisions are wrong. Two "no" of the first two labels reach it; one does not.
    min_precision: float = 0.7


# A judge question's typical size, tokens in and out: what converts the old counts of questions to money and
# back. The mean of claude-sonnet-5-5's reads on the replay of a real KB (docs/choices.md).
QUESTION_TOKENS = (1500, 100)
# The scripted judge has no price: its balance opens at 20 questions and deposits 8 a resolution, as it always
# did (optimistic_cap / questions_per_resolution, when set, replace them).
SCRIPTED_QUESTIONS = (20, 8)


@dataclass
class Config:
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    shortlist: ShortlistConfig = field(default_factory=ShortlistConfig)
    describe: DescribeConfig = field(default_factory=DescribeConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    git: GitConfig = field(default_factory=GitConfig)
    apply: ApplyConfig = field(default_factory=ApplyConfig)
    prices: dict[str, Price] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    # What the file sets that is ignored, each a sentence naming the keys (an older budget key beside its newer
    # one): a session's notes and `status` show them, and a session logs them as warnings.
    ignored: list[str] = field(default_factory=list)

    def where(self, key: str, environ: Mapping[str, str] = os.environ) -> str:
        """Where `key`'s value comes from: the environment variable that set it (load_config), else the file.
        Read from the environment as it is, not kept on the Config, so a copy of the Config says the same."""
        var = ENVIRONMENT.get(key)
        section, name = key.split(".")
        if var and environ.get(var, "").strip() and environ[var].strip() == getattr(getattr(self, section), name):
            return f"the environment ({var}, which wins over {CONFIG_FILE})"
        return CONFIG_FILE

    def price(self, model: str) -> Price | None:
        """The price of a model, matching dated ids (claude-sonnet-4-5-20250929) by prefix."""
        if model in self.prices:
            return self.prices[model]
        best = max((name for name in self.prices if model.startswith(name + "-")), key=len, default=None)
        return self.prices[best] if best else None

    def question_usd(self, model: str | None = None) -> float | None:
        """A typical question's price at `model` (judge.model): what converts a count of questions to money."""
        price = self.price(model or self.judge.model)
        return None if price is None else price.usd(*QUESTION_TOKENS)

    def budget_usd(self) -> tuple[float, float] | None:
        """The balance's opening and deposit in USD; optimistic_cap / questions_per_resolution, if set, converted
        at judge.model's question price (None: judge.model has no price)."""
        b, q = self.budget, self.question_usd()
        if q is None:
            return None
        return (
            b.optimistic_cap * q if b.optimistic_cap else b.opening_usd,
            b.questions_per_resolution * q if b.questions_per_resolution else b.usd_per_resolution,
        )

    def budget_questions(self) -> tuple[int, int]:
        """The balance in questions of a judge with no price (the scripted judge): the question keys as set, else
        the counts it always had."""
        b = self.budget
        return b.optimistic_cap or SCRIPTED_QUESTIONS[0], b.questions_per_resolution or SCRIPTED_QUESTIONS[1]

    def models(self) -> dict[str, str]:
        """Every model a session may call, by the key that names it (judge.model, and describe.model with lines on)."""
        named = {"judge.model": self.judge.model}
        if self.judge.first_reader and self.judge.first_reader != self.judge.model:
            named["judge.first_reader"] = self.judge.first_reader
        if self.describe.enabled and self.describe.model:
            named["describe.model"] = self.describe.model
        return named

    def require_prices(self) -> None:
        """Every model a session may pay for has a price."""
        for key, model in self.models().items():
            self.require_price(model, key)

    def require_price(self, model: str, key: str = "judge.model") -> Price:
        """The model's price, or a configuration error naming the key to set: an unknown price never counts as $0."""
        price = self.price(model)
        if price is None and (retired := retired_model(model)):
            raise ConfigError(f"{key} {model!r} is {retired}: set another in {self.where(key)} (docs/real-api.md)")
        if price is None:
            raise ConfigError(
                f"{key} {model!r} has no price, so no dollar cap could hold: set "
                f'[prices."{model}"] input_per_mtok and output_per_mtok (USD per million tokens) '
                f"in {CONFIG_FILE}, or name a priced model in {self.where(key)}"
            )
        return price


# a section's dataclass (or a model's Price)
_Section = TypeVar("_Section", bound="DataclassInstance")

# Keys still accepted so that older files load, no longer read (DEFAULT_TOML leaves them out).
RETIRED = {"budget.window", "budget.patience", "budget.unproven_allowance"}
# An older budget key (in judge-model questions) and the key in USD that replaced it: a file that sets both (an
# older init file with opening_usd added) means the one added, so the newer wins and a note names the older.
SUPERSEDED = {
    "budget.optimistic_cap": "budget.opening_usd",
    "budget.questions_per_resolution": "budget.usd_per_resolution",
}

WORDS = {
    "JudgeMode": MODES,
    "Effort": EFFORTS,
    "RetractMode": RETRACT_MODES,
    "FrontMatter": FRONT_MATTER,
    "ApplyMode": APPLY_MODES,
}
_TYPES: dict[str, type] = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "list[str]": list,
    **dict.fromkeys(WORDS, str),
}


_SECTION_TYPES: dict[str, type[DataclassInstance]] = {
    "judge": JudgeConfig,
    "shortlist": ShortlistConfig,
    "describe": DescribeConfig,
    "budget": BudgetConfig,
    "discovery": DiscoveryConfig,
    "corpus": CorpusConfig,
    "schedule": ScheduleConfig,
    "calibration": CalibrationConfig,
    "metrics": MetricsConfig,
    "git": GitConfig,
    "apply": ApplyConfig,
}
# Every number's range, checked after its type (and that it is finite: NaN passes no comparison, so a NaN price
# would turn off every dollar cap). The upper bounds sit far above any setting that makes sense and far below
# where the arithmetic downstream stops being finite (a balance divided by a read's price, a count of reads
# turned into an int, a retry wait doubled per attempt): money at most USD_MAX, a price at most PRICE_MAX per
# million tokens, a wait at most a day, a count at most what a session could ever ask (docs/configuration.md).
# a session, a day, a month, an opening, a resolution
USD_MAX = 1_000_000.0
# USD per million tokens: a dollar a token
PRICE_MAX = 1_000_000.0
# ... and a price that is not 0 is at least this: the balance over a read's price stays finite
PRICE_MIN = 1e-6
# a judgment's time limit, a retry wait
SECONDS_MAX = 86_400.0
# the older budget keys, in judge-model questions
QUESTIONS_MAX = 1_000_000
_BOUNDS: dict[str, tuple[float, float]] = {
    "judge.concurrency": (1, 1000),
    "judge.timeout_s": (0.001, SECONDS_MAX),
    "judge.max_attempts": (1, 100),
    "judge.samples": (1, 100),
    "judge.min_agreement": (0, 1),
    "judge.swap_sample": (0, 1),
    "judge.audit_share": (0, 1),
    "judge.first_reader_recall": (0.01, 0.99),
    "judge.max_cost_usd": (0, USD_MAX),
    "judge.max_tokens": (1, 1_000_000),
    "judge.backoff_s": (0, SECONDS_MAX),
    "judge.backoff_max_s": (0, SECONDS_MAX),
    "judge.max_evidence_chars": (200, 10_000_000),
    # optimistic_cap and unproven_allowance of 0 would latch a pass off: no offers, so never the verdicts
    # that move it to another state. Every off-state must still generate the evidence its way back reads.
    "shortlist.k": (1, 1000),
    "describe.batch": (1, 10_000),
    "describe.carriers": (1, 100),
    "describe.body_chars": (100, 10_000_000),
    "describe.max_tries": (1, 1000),
    "budget.window": (1, QUESTIONS_MAX),
    "budget.patience": (1, QUESTIONS_MAX),
    "budget.probe_every": (1, QUESTIONS_MAX),
    "budget.unproven_allowance": (1, QUESTIONS_MAX),
    # 0 = not set: opening_usd and usd_per_resolution hold
    "budget.optimistic_cap": (0, QUESTIONS_MAX),
    "budget.questions_per_resolution": (0, QUESTIONS_MAX),
    # 0 would latch a defunded pass off: a probe that resolved something would leave it at zero.
    "budget.opening_usd": (0, USD_MAX),
    "budget.usd_per_resolution": (0.0001, USD_MAX),
    # 0: a changed fact waits for its rank like any other question
    "budget.fresh_per_change": (0, 1000),
    "budget.max_usd_per_day": (0, USD_MAX),
    "budget.max_usd_per_month": (0, USD_MAX),
    "discovery.confidence": (0, 1),
    "discovery.min_group": (2, 100),
    "discovery.max_group": (2, 100),
    "discovery.group_similarity": (-1, 1),
    "discovery.match_similarity": (-1, 1),
    "corpus.max_fact_bytes": (1, 1 << 30),
    "calibration.sample_rate": (0, 1),
    "calibration.min_precision": (0, 1),
}
# [prices."MODEL"], by key: a negative price makes every estimate negative, and a cost cap then never stops a
# session (a price of nothing at all is refused in parse_config: no balance or cap can count it)
_PRICE_BOUNDS: dict[str, tuple[float, float]] = {
    "input_per_mtok": (0, PRICE_MAX),
    "output_per_mtok": (0, PRICE_MAX),
    "batch_discount": (0, 1),
    "tier_tokens": (0, 100_000_000),
    "input_per_mtok_above": (0, PRICE_MAX),
    "output_per_mtok_above": (0, PRICE_MAX),
}


def bounds(key: str) -> tuple[float, float] | None:
    """The range of a numeric key (`budget.opening_usd`, `prices."MODEL".input_per_mtok`), or None for another."""
    if key.startswith("prices."):
        return _PRICE_BOUNDS.get(key.rsplit(".", 1)[1])
    return _BOUNDS.get(key)


_CHOICES = {
    "corpus.retract": RETRACT_MODES,
    "corpus.front_matter": FRONT_MATTER,
    "judge.effort": EFFORTS,
    "apply.mode": APPLY_MODES,
}
# what `git check-ref-format --branch` would accept, less its rarer refusals (those fail at the push)
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]+(?<![./])$")
# a remote's name, not a URL: its URL and credentials stay in git
_REMOTE = re.compile(r"^(?!-)[A-Za-z0-9._-]+$")
_KEY_NAME = re.compile(r"^[A-Za-z_][\w-]*$")
# nothing left out is a setting; no paths, or no motif key, is not  # a top-level front-matter key, as rewrite.rewrite finds them
_MAY_BE_EMPTY = {"corpus.exclude"}


def _check_list(key: str, value: list[Any]) -> list[str]:
    """A non-empty list of non-empty strings (`corpus.exclude` may be empty); paths must stay inside the corpus,
    keys must be plain keys."""
    if not value and key in _MAY_BE_EMPTY:
        return []
    if not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{key}: expected a non-empty list of non-empty strings, got {value!r}")
    for v in value:
        if key in ("corpus.paths", "corpus.exclude") and (v.startswith("/") or ".." in v.split("/")):
            raise ConfigError(f"{key}: {v!r} must be relative to the corpus root, without '..'")
        if key == "corpus.exclude" and v.strip().endswith("/"):
            raise ConfigError(f"{key}: {v!r} names a folder: write {v.strip() + '**'!r} for every file under it")
        if key == "corpus.motif_keys" and not _KEY_NAME.match(v):
            raise ConfigError(f"{key}: {v!r} is not a front-matter key name")
    return list(dict.fromkeys(v.strip() for v in value))


def _check(key: str, value: Any, typ: type) -> Any:
    """The TOML value of `key`, checked against its type, bounds and choices (an int read as a float)."""
    ok = {
        list: isinstance(value, list),
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
        str: isinstance(value, str),
    }[typ]
    if not ok:
        raise ConfigError(f"{key}: expected {typ.__name__}, got {type(value).__name__} {value!r}")
    if typ is list:
        return _check_list(key, value)
    if key in _CHOICES and value not in _CHOICES[key]:
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(repr, _CHOICES[key]))}")
    if key in ("git.branch", "apply.proposals") and not _BRANCH.match(value):
        raise ConfigError(f"{key}: {value!r} is not a branch name")
    if key == "git.remote" and value and not _REMOTE.match(value):
        raise ConfigError(f"{key}: {value!r} is not a git remote name (see `git remote`)")
    if key == "judge.model" and not value.strip():
        raise ConfigError(f"{key}: must name a model, got {value!r}")
    if typ in (int, float):
        _check_number(key, value)
    return float(value) if typ is float else value


def _check_number(key: str, value: float) -> None:
    """A number is finite and within its key's range; the error names the key and the value as written."""
    if not math.isfinite(value):
        raise ConfigError(f"{key}: {value!r} is not a finite number")
    if key.startswith("prices.") and value < 0:
        raise ConfigError(f"{key}: {value!r} must not be negative (USD per million tokens)")
    if key.endswith("_mtok") or key.endswith("_mtok_above"):
        if 0 < value < PRICE_MIN:
            raise ConfigError(
                f"{key}: {value!r} is out of range (must be 0 or from {PRICE_MIN!r} to {_num(PRICE_MAX)} "
                "USD per million tokens)"
            )
    lo, hi = bounds(key) or (-math.inf, math.inf)
    if not lo <= value <= hi:
        want = (
            f"from {_num(lo)} to {_num(hi)}"
            if hi <= 1
            else f"at least {_num(lo)}"
            if value < lo
            else f"at most {_num(hi)}"
        )
        raise ConfigError(f"{key}: {value!r} is out of range (must be {want})")


def value_range(key: str) -> str:
    """A numeric key's range as the docs give it (`1 to 1000`, `0, or 1e-06 to 1000000`); "" for another key."""
    if (b := bounds(key)) is None:
        return ""
    if key.endswith(("_mtok", "_mtok_above")):
        return f"0, or {PRICE_MIN!r} to {_num(PRICE_MAX)}"
    if key.endswith("batch_discount"):
        return "0 to below 1"
    return f"{_num(b[0])} to {_num(b[1])}"


def _num(x: float) -> str:
    """A bound as a person writes it: 1000000, 0.0001."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _section(name: str, cls: type[_Section], raw: Any) -> _Section:
    """One table of the file as its dataclass, every key checked; an unknown or missing key names itself."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{name}: expected a table")
    types = {f.name: str(f.type) for f in dataclasses.fields(cls)}  # annotations are strings (__future__)
    values = {}
    for key, value in raw.items():
        if key not in types:
            raise ConfigError(f"{name}.{key}: unknown key (known: {', '.join(types)})")
        values[key] = _check(f"{name}.{key}", value, _TYPES[types[key]])
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and f.name not in values
    ]
    if missing:
        raise ConfigError(f"{name}.{missing[0]}: required")
    return cls(**values)


def parse_config(data: dict[str, Any]) -> Config:
    """Build a Config from parsed TOML, rejecting unknown keys and wrong types by name."""
    config = Config()
    for name, raw in data.items():
        if name == "prices":
            if not isinstance(raw, dict):
                raise ConfigError("prices: expected a table of models")
            for model, price in raw.items():
                config.prices[model] = _section(f'prices."{model}"', Price, price)
                if not (config.prices[model].input_per_mtok or config.prices[model].output_per_mtok):
                    raise ConfigError(
                        f'prices."{model}": input_per_mtok and output_per_mtok are both 0: a read that '
                        "costs nothing has no price the balance and the dollar caps can count; set "
                        "the model's list price"
                    )
                if not 0 <= config.prices[model].batch_discount < 1:
                    raise ConfigError(
                        f'prices."{model}".batch_discount: '
                        f"{config.prices[model].batch_discount!r} is out of range (0 to below 1)"
                    )
        elif name in _SECTION_TYPES:
            setattr(config, name, _section(name, _SECTION_TYPES[name], raw))
        else:
            raise ConfigError(f"{name}: unknown section (known: {', '.join([*_SECTION_TYPES, 'prices'])})")
    config.ignored = superseded(config, data)
    if config.judge.mode not in MODES:
        raise ConfigError(f"judge.mode: {config.judge.mode!r} is not one of {', '.join(MODES)}")
    if config.discovery.min_group > config.discovery.max_group:
        raise ConfigError("discovery.min_group: larger than discovery.max_group")
    # proposals committed on the reviewed branch are no proposals
    if config.apply.proposals == config.git.branch:
        raise ConfigError(f"apply.proposals: {config.apply.proposals!r} is git.branch, the branch it proposes to")
    if "cron" in data.get("schedule", {}):
        cron_trigger(config.schedule.cron, key="schedule.cron")
    return config


def superseded(config: Config, data: dict[str, Any]) -> list[str]:
    """Older budget keys set beside the newer ones: set to 0 (not set), so the newer holds, each named in a note.

    Every file `init` wrote before the balance counted money has optimistic_cap = 20 and
    questions_per_resolution = 8; a person who adds opening_usd means it. An error naming both would stop
    an unattended cron job over a file whose meaning is plain, so the newer key wins, and the note says so
    wherever a session's outcome is read (docs/choices.md).
    """
    notes = []
    for old, new in SUPERSEDED.items():
        section, old_name = old.split(".")
        raw = data.get(section) or {}
        if raw.get(old_name) and new.split(".")[1] in raw:
            setattr(getattr(config, section), old_name, 0)
            notes.append(
                f"{CONFIG_FILE}: {old} = {raw[old_name]!r} is ignored: {new} = "
                f"{raw[new.split('.')[1]]!r} is set beside it and wins (delete {old} to say so)"
            )
    return notes


def load_config(corpus: Path, environ: Mapping[str, str] = os.environ) -> Config:
    """Read CORPUS/knomit-judge.toml if present, then apply environment overrides."""
    path = Path(corpus) / CONFIG_FILE
    data = {}
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: {e}") from None
    try:
        config = parse_config(data)
    # the key and the value, and the file they are in
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    if environ.get("KNOMIT_JUDGE_MODEL"):
        config.judge.model = environ["KNOMIT_JUDGE_MODEL"]
    # "" turns the first reader off, as judge.first_reader = "" does
    if "KNOMIT_JUDGE_FIRST_READER" in environ:
        config.judge.first_reader = environ["KNOMIT_JUDGE_FIRST_READER"].strip()
    return config


DEFAULT_TOML = """\
# knomit-judge configuration. Every key is optional; the values below are the defaults.
# An unknown key, a wrong type or an out-of-range value is an error naming the key (exit 2).
# KNOMIT_JUDGE_MODEL overrides judge.model, KNOMIT_JUDGE_FIRST_READER judge.first_reader;
# ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL are read by the SDK.

[judge]
model = "claude-sonnet-5-5"   # a current model; `knomit-judge review` checks its lifecycle every session
effort = "low"           # how hard a thinking model thinks: low, medium, high, xhigh or max (docs/choices.md)
first_reader = "claude-haiku-5-5"  # reads every question first; its yes goes to `model`, which decides; "" = off
audit_share = 0.03       # of a pass's first reads, this share of its no's (at least 2) is read again by `model`
first_reader_recall = 0.8  # the first reader's recall the audits hold it to; below it, the pass reads with `model`
concurrency = 4          # judge calls in flight at once
timeout_s = 600          # per judgment, retries included
max_attempts = 3         # per call, on rate limits, overload, 5xx and connection errors
samples = 1              # replies per order; with more, the answer needs min_agreement
min_agreement = 0.67     # below it the judge is undecided and the default answer stands
position_swap = true     # a pair whose first order is not the default is asked in its second; a split is the default
swap_sample = 0.1        # share of default-first pairs asked in both orders anyway: measures the flip rate
max_cost_usd = 5.0       # per session; the rest waits for the next one
max_tokens = 400         # per answer; a thinking model gets room for its thinking on top (docs/real-api.md)
backoff_s = 1.0          # first retry wait, doubling with jitter
backoff_max_s = 60.0     # longest retry wait
max_evidence_chars = 8000  # per fact body shown to prune and discovery; the rest is cut with a marker
mode = "sync"            # "batch": submit offered questions as one Message Batch (half price), collected next session

# [prices."claude-sonnet-5-5"]   # USD per million tokens; current models ship with prices
# input_per_mtok = 2.0
# output_per_mtok = 10.0
# batch_discount = 0.5         # Message Batches cost this share less
# tier_tokens = 0              # a prompt over this many tokens bills at the *_above prices (0: one price)

[shortlist]
k = 5                    # nearest neighbours per motif / fact

[describe]               # one line per motif spelling nominates alias candidates (docs/candidates.md)
enabled = true           # false, or the scripted judge without describe lines: the embeddings alone
model = "claude-haiku-5-5"  # writes the lines (the cheapest current model); "" = judge.model
batch = 85               # spellings per request
carriers = 3             # carriers shown per spelling
body_chars = 600         # characters of each carrier's body shown
max_tries = 3            # requests that may give a spelling no line; then it waits until its carriers change

[budget]                 # per pass: a balance of questions; docs/configuration.md says why these values
enabled = true           # false: no throttle (backfills, benchmarks); the line says unthrottled
opening_usd = 0.05       # the balance a pass opens with, in USD, before any verdict; each read withdraws its cost
usd_per_resolution = 0.04  # what one resolved decision is worth to you: each deposits this, and a read is offered
                         # while its chance of resolving something times this is at least its price
optimistic_cap = 0       # older files: the opening in judge-model questions (converted); 0 = opening_usd holds
questions_per_resolution = 0   # older files: the deposit in judge-model questions; 0 = usd_per_resolution holds
probe_every = 5          # a defunded pass (balance 0) still asks one question every `probe_every` sessions
fresh_per_change = 2     # a fact new or edited since the last session: its 2 nearest questions are asked then
max_usd_per_day = 5.0    # not per pass: every session of a UTC day (counted on the day it started); the rest waits
max_usd_per_month = 50.0 # not per pass: every session of a UTC calendar month; the rest waits

[discovery]
confidence = 0.4         # of a proposed fact: below the default 0.5, it is a proposal
min_group = 3
max_group = 8
group_similarity = 0.4   # a fact's nearest neighbours at least this close join its group
match_similarity = 0.85  # a proposed fact this close to an existing one is linked to it

[corpus]
paths = ["facts/**/*.md"]  # where facts are: globs relative to the corpus root (** = any depth)
motif_keys = ["motifs"]    # front-matter list keys whose values are motifs (e.g. ["entities"] or ["tags"])
retract = "status"         # "status": keep the file with status: retracted; "delete": remove it in the commit
front_matter = "required"  # "optional": a note without front matter is read too (titled by its file name)
exclude = []               # globs of matched files that are no facts, e.g. ["Templates/**"] (a vault: init fills it)
inline_tags = false        # true: #tags in a note's body are motifs too (a vault: init writes true)
max_fact_bytes = 1048576   # larger fact files are reported and skipped

[schedule]
cron = "0 3 * * *"       # for `knomit-judge daemon`, in UTC; 6 fields = seconds first

[calibration]            # the inbox and the labels people give (`knomit-judge inbox`, `knomit-judge label`)
sample_rate = 0.1        # share of each session's applied decisions per pass sampled into the inbox (at least 1)
min_precision = 0.7      # a pass whose precision interval lies wholly below this is on probation: applies nothing

[git]                    # a shared remote (docs/unattended.md): merge before reviewing, push after
remote = ""              # a configured git remote, e.g. "origin"; "" keeps sessions local (nothing fetched or pushed)
branch = "main"          # the remote branch merged before a session and pushed to after it; never force-pushed

[apply]                  # how decisions land (docs/people-in-the-loop.md): committed, or proposed for a person's word
mode = "commit"          # "propose": decisions go on the proposals branch; `knomit-judge approve` lands them
proposals = "knomit-judge/proposals"  # the proposals branch (pushed with [git] remote, never force-pushed)

[metrics]
textfile = ""            # e.g. "/var/lib/node_exporter/textfile/knomit-judge.prom": written after every session
"""
