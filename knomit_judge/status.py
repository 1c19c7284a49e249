"""Status lines: one per pass per session, naming which zero it is, with the counts and the cost."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from .cost import Cost

# Which zero a pass's session is, or that it worked: `aborted` when the session stopped on an error or a signal
# (session.review.aborted), `would-offer` in a dry run that would ask (it asks nothing), `skipped`: the describe
# step, turned off or with no lines to give (session/describe.py).
State = Literal[
    "nothing-qualified", "caught-up", "defunded", "broken", "worked", "batched", "aborted", "would-offer", "skipped"
]
STATES: tuple[State, ...] = get_args(State)


@dataclass
class PassResult:
    """What one pass (or the describe step) did in one session: its state, counts and cost."""

    name: str
    state: State = "nothing-qualified"
    candidates: int = 0
    offered: int = 0
    judged: int = 0
    resolved: int = 0
    declined: int = 0
    cached: int = 0
    unavailable: int = 0
    unparsed: int = 0
    # questions the API refused for their content this session: never verdicts
    refused: int = 0
    # questions submitted in a Message Batch this session, or still waiting on one
    batched: int = 0
    applied: int = 0
    # candidates the budget held back this session
    waiting: int = 0
    # waiting questions touching a fact or spelling changed since the pass's last session
    fresh: int = 0
    # questions offered in the session's first round: all a dry run's estimate covers
    first_round: int = 0
    judge_calls: int = 0
    attempts: int = 0
    cost_usd: float | None = 0.0
    # what the dollar caps counted: cost_usd, with calls of unknown cost at their bound
    charged_usd: float = 0.0
    throttle: str = ""
    notes: list[str] = field(default_factory=list)
    first_error: str = ""
    next_probe_in: int | None = None
    # set while people's labels hold the pass's decisions (precision.py)
    probation: str = ""
    # describe: lines written this session
    written: int = 0
    # the first reader (session/readers.py): its model, questions it read, its yeses the judge model confirmed or not,
    # and its no's the judge model read again (audits) and answered yes (misses)
    first_reader: str = ""
    # reading | suspended (audits.py); "" with no first reader
    first_reader_state: str = ""
    first_reads: int = 0
    first_confirmed: int = 0
    first_unconfirmed: int = 0
    audits: int = 0
    misses: int = 0
    # audits gathered into this session's Message Batch: read in the next collection
    audits_batched: int = 0
    # questions the first reader could not read (unavailable, refused): the judge model read them
    handed_over: int = 0
    # a suspended first reader's reads of its shadow sample: recorded, never acted on
    shadow_reads: int = 0
    # describe: spellings with an active carrier and no line at the session's end
    missing: int = 0

    def _cost(self) -> str:
        return "incomplete" if self.cost_usd is None else f"${self.cost_usd:.4f}"

    def _notes(self) -> str:
        """The line's tail: the first error, the probation, then the notes."""
        notes = [self.probation] * bool(self.probation) + list(self.notes)
        if self.first_error:
            notes.insert(0, f"first error: {self.first_error}")
        return "".join(f"; {n}" for n in notes)

    def settle(self, held: bool, dry_run: bool = False) -> None:
        """Name the state from the counts; `held` means candidates waited behind the budget."""
        waiting = self.candidates - self.cached
        if dry_run and self.offered:
            # a dry run asks nothing, so it is neither worked nor broken
            self.state = "would-offer"
        # applied: yeses decided earlier, applied now without a call
        elif self.judged or self.applied:
            self.state = "worked"
        elif self.candidates == 0:
            self.state = "nothing-qualified"
        elif self.batched:
            # the answers are bought; the next session collects them
            self.state = "batched"
        elif self.offered:
            self.state = "broken"
        elif waiting > 0 and held:
            self.state = "defunded"
        else:
            self.state = "caught-up"

    def line(self) -> str:
        """The pass's status line."""
        state: str = self.state
        if state == "defunded" and self.next_probe_in:
            state += f" (next probe in {self.next_probe_in} session{'s' if self.next_probe_in != 1 else ''})"
        counts = (
            f"candidates {self.candidates}, offered {self.offered}, judged {self.judged}, "
            f"resolved {self.resolved}, declined {self.declined}, cached {self.cached}, waiting {self.waiting}, "
            f"unavailable {self.unavailable}, unparsed {self.unparsed}, refused {self.refused}, "
            f"judge calls {self.judge_calls}, "
            f"cost {self._cost()}"
        )
        tail = f" [{self.throttle}]" if self.throttle else ""
        return f"{self.name}: {state} - {counts}{tail}" + self._notes()

    def json(self) -> dict[str, Any]:
        """The counts as --json and the sessions table hold them (the name is their key)."""
        d = asdict(self)
        d.pop("name")
        return d


@dataclass
class LinesResult(PassResult):
    """What the step that writes the describe lines did (session/lines.py): its line says lines, not questions."""

    def line(self) -> str:
        """The describe step's line: what the alias pass's line signal cost this session."""
        counts = (
            f"lines written {self.written}, {self._cost()} - spellings {self.candidates}, with a line already "
            f"{self.cached}, asked {self.offered}, missing {self.missing}, judge calls {self.judge_calls}"
            + "".join(f", {k} {getattr(self, k)}" for k in ("unavailable", "unparsed", "refused") if getattr(self, k))
        )
        return f"{self.name}: {self.state} - {counts}" + self._notes()


def total_cost(results: Iterable[PassResult]) -> float | None:
    """What the passes cost together; None when any one's cost is unknown."""
    return sum((Cost(r.cost_usd) for r in results), Cost()).rounded()
