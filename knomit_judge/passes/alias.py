"""Alias: do two motif spellings name one mechanism? A yes rewrites the losing spelling everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..corpus import Corpus, body_start, front_matter
from ..nominate import MAX_TITLES, TRUNCATED, nominate
from ..notes import inline_tags, is_tag
from ..prompts import Prompt, load_prompt
from ..rewrite import renamed_motif
from ..survivors import spelling_survivor
from ..verdicts import MECHANICAL, JudgeKind, Verdict, encoded_side, fingerprint_encoded
from .base import (
    YES_NO,
    About,
    AnswersAsShown,
    Candidate,
    Change,
    Evidence,
    Reply,
    Restorer,
    Session,
    Shape,
    Subject,
    one_sentence,
    reply_object,
)

# a spelling and its carriers, encoded for fingerprint_encoded
Side = tuple[str, str]
# front-matter list keys a corpus may keep its motifs under: what a session names when its motif keys hold none
MOTIF_KEY_NAMES = ("motifs", "entities", "tags", "keywords", "topics", "categories")
_SAMPLE = 50


def motif_side(motif: str, corpus: Corpus) -> Side:
    """One side of an alias question, encoded for fingerprint_encoded: the spelling and its carriers' content ids."""
    return encoded_side([motif, sorted(corpus.facts[p].content_id for p in corpus.carriers.get(motif, ()))])


def motif_fingerprint(a: str, b: str, corpus: Corpus, side: Callable[[str], Side] | None = None) -> str:
    """`side` (a memo of motif_side) saves encoding a broad motif's thousands of carriers again for every pair."""
    side = side or (lambda m: motif_side(m, corpus))
    return fingerprint_encoded(side(a), side(b))


class AliasPass(AnswersAsShown):
    """The alias pass: two spellings asked whether they name one mechanism."""

    name = "alias"
    # a question's sides are motif spellings (the other passes': fact paths)
    about: About = "spellings"
    shape: Shape = "pair"
    default = "different"
    yes = {"same"}
    proposes = False
    labels: tuple[str, ...] = YES_NO
    # (floor, full), worth.py: the lowest true pair scored 0.20 (calibration), 0.30 (knomit's KB)
    prior = (0.15, 0.5)
    # the describe lines nominate pairs too (nominate.py): the step runs before the first round
    reads_lines = True
    writes_lines = False
    # A yes names the two spellings themselves, so it stands when their carriers change (see restated)
    restates_yeses = True
    # A new spelling is owed its questions only where a name match nominated them (string or acronym, 0.85 and
    # up): a writer's `fail-open` beside `fail open`. Owing its nearest by meaning cost more and merged less.
    owes_questions_to_new = True
    owed_min_score = TRUNCATED

    @property
    def prompt(self) -> Prompt:
        return load_prompt("alias")

    def evidence(self, motif: str, corpus: Corpus) -> Evidence:
        """What the judge reads of one spelling: how many carriers, and the first carriers' titles."""
        carriers = corpus.carrier_facts(motif)
        return {
            "spelling": motif,
            "carriers": len(carriers),
            "carrier_titles": [f.title for f in carriers[:MAX_TITLES]],
        }

    def candidate(
        self,
        a: str,
        b: str,
        corpus: Corpus,
        score: float,
        *,
        evidence: Callable[[str], Evidence] | None = None,
        side: Callable[[str], Side] | None = None,
    ) -> Candidate:
        """The question about spellings a and b, with the evidence in both orders (and how many carriers both have)."""
        return Candidate(
            self.name,
            {"a": a, "b": b},
            motif_fingerprint(a, b, corpus, side),
            score,
            self.orders(a, b, corpus, evidence),
        )

    def orders(
        self, a: str, b: str, corpus: Corpus, evidence: Callable[[str], Evidence] | None = None
    ) -> list[Evidence]:
        """The evidence in both orders, with how many carriers the two spellings share."""
        evidence = evidence or (lambda m: self.evidence(m, corpus))
        ea, eb = evidence(a), evidence(b)
        shared = len(set(corpus.carriers.get(a, ())).intersection(corpus.carriers.get(b, ())))
        return [
            {"motif_a": ea, "motif_b": eb, "shared_carriers": shared},
            {"motif_a": eb, "motif_b": ea, "shared_carriers": shared},
        ]

    def candidates(self, ctx: Session) -> list[Candidate]:
        """Every signal's nominations, deduplicated, best-ranked first (see nominate.py for the score).

        `ctx.lines` (spelling -> describe line), when the session has lines, adds the line signal.
        """
        corpus = ctx.corpus
        # a motif's evidence and side, built once however many pairs it is in
        memo: dict[str, Evidence] = {}
        sides: dict[str, Side] = {}

        def evidence(m: str) -> Evidence:
            if m not in memo:
                memo[m] = self.evidence(m, corpus)
            return memo[m]

        def side(m: str) -> Side:
            if m not in sides:
                sides[m] = motif_side(m, corpus)
            return sides[m]

        return [
            self.candidate(n.a, n.b, corpus, n.score, evidence=evidence, side=side)
            for n in nominate(list(corpus.carriers), corpus, ctx.embedder, ctx.config.shortlist.k, ctx.lines)
        ]

    def restorer(self, ctx: Session) -> Restorer:
        """Makes a candidate read back from candidate_lists, its evidence from the corpus again."""
        corpus = ctx.corpus
        memo: dict[str, Evidence] = {}

        def evidence(m: str) -> Evidence:
            if m not in memo:
                memo[m] = self.evidence(m, corpus)
            return memo[m]

        def restore(s: Subject, fp: str, score: float) -> Candidate:
            return Candidate(self.name, s, fp, score, self.orders(s["a"], s["b"], corpus, evidence))

        return restore

    def restated(self, origin: Verdict, corpus: Corpus, session: str, judge: JudgeKind) -> Verdict | None:
        """The judge's yes on two spellings, recorded again for their carriers as they are now (no call).

        A writer who uses a retired spelling again, or a merge of a third spelling that rewrote a carrier both
        share, gives the pair a new fingerprint; what the judge decided was that the two names are one, and
        that has not changed. None while either spelling has no carrier (nothing to merge).
        """
        a, b = origin.subject["a"], origin.subject["b"]
        if not (corpus.carriers.get(a) and corpus.carriers.get(b)):
            return None
        return Verdict(
            pass_name=self.name,
            fingerprint=motif_fingerprint(a, b, corpus),
            subject={"a": a, "b": b},
            answer=origin.answer,
            is_yes=True,
            rationale=f"as verdict {origin.id} decided: {origin.rationale}",
            model=MECHANICAL,
            prompt=origin.prompt,
            attempts=0,
            calls=0,
            cost_usd=0.0,
            session=session,
            judge=judge,
        )

    @property
    def default_reply(self) -> dict[str, Any]:
        return {"same": False, "mechanism": ""}

    def label_of(self, answer: str) -> str:
        """same is a yes label, different a no."""
        return "yes" if answer == "same" else "no"

    def parse(self, text: str) -> Reply:
        """same with a mechanism, or different (a bare 'same' included)."""
        obj = reply_object(text, {"same": ((bool,), True), "mechanism": ((str,), False)})
        mechanism = one_sentence(obj.get("mechanism"))
        if obj["same"] and mechanism:
            return "same", mechanism, None
        return "different", ("'same' without a mechanism: recorded as different" if obj["same"] else mechanism), None

    def still_holds(self, verdict: Verdict, corpus: Corpus) -> bool:
        """Both spellings still carried, by the same carriers as when the judge was asked."""
        s = verdict.subject
        return (
            bool(corpus.carriers.get(s["a"]))
            and bool(corpus.carriers.get(s["b"]))
            and motif_fingerprint(s["a"], s["b"], corpus) == verdict.fingerprint
        )

    def change(self, verdict: Verdict, ctx: Session) -> Change:
        """The losing spelling rewritten to the survivor in every carrier."""
        corpus = ctx.corpus
        a, b = verdict.subject["a"], verdict.subject["b"]
        keep = spelling_survivor(a, b, corpus)
        lose = b if keep == a else a
        if (
            corpus.inline_tags
            and not is_tag(keep)
            and any(lose in inline_tags(f.text[body_start(f.text) :]) for f in corpus.carrier_facts(lose))
        ):
            # `#retry-storm` cannot be written `#Retry Storm`: the spelling a tag can hold wins
            keep, lose = lose, keep
        writes: dict[str, str | None] = {}
        for fact in corpus.carrier_facts(lose):
            # inside the key it came from, and inline where the layout reads #tags
            writes[fact.path] = renamed_motif(fact, lose, keep, corpus.motif_keys, inline=corpus.inline_tags)
        titles = {m: [f.title for f in corpus.carrier_facts(m)[:MAX_TITLES]] for m in (a, b)}
        body = (
            f"The judge read {len(titles[a])} carrier titles of '{a}' and {len(titles[b])} of '{b}'.\n"
            f"'{keep}' survives by the fixed rules; {len(writes)} carrier(s) of '{lose}' rewritten."
        )
        return Change(writes, f"alias: merge motif '{lose}' into '{keep}'", body)


def no_motif_note(corpus: Corpus) -> str | None:
    """What a session says when no active fact carries a motif under its motif keys: the list keys a sample of the
    facts does carry, so that `nothing-qualified` is not all it says (issue 54). None when some fact carries one."""
    facts = corpus.active()
    if corpus.carriers or not facts:
        return None
    sample = facts[:: max(1, len(facts) // _SAMPLE)][:_SAMPLE]
    counts: dict[str, int] = {}
    for fact in sample:
        meta = front_matter(fact.text)
        for key in MOTIF_KEY_NAMES:
            if isinstance(meta.get(key), list) and meta[key]:
                counts[key] = counts.get(key, 0) + 1
    keys = ", ".join(f'"{k}"' for k in corpus.motif_keys)
    said = f"no fact carries a motif under [corpus] motif_keys = [{keys}]" + (
        " or inline" if corpus.inline_tags else ""
    )
    if counts:
        best = max(counts, key=lambda k: (counts[k], -MOTIF_KEY_NAMES.index(k)))
        said += f'; {counts[best]} of {len(sample)} sampled facts carry `{best}:` lists: set motif_keys = ["{best}"]'
    return said
