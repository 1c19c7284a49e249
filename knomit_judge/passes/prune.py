"""Prune: are two facts one? A merge folds one into the other; a retract retires the redundant one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from ..config import JudgeConfig
from ..corpus import Corpus, Fact, fact_text
from ..errors import BadFact, Unparsed
from ..links import vault_of
from ..prompts import Prompt, cut, load_prompt
from ..relink import names_taken, relinked_note, titles_are_names
from ..rewrite import absorbed, carried_over, copy_provenance, provenance, retracted, rewrite
from ..shortlist import neighbour_pairs
from ..survivors import fact_survivor, why_survives
from ..verdicts import JudgeKind, Verdict, fingerprint, pair_fingerprint
from .base import (
    About,
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


def fact_evidence(fact: Fact, max_chars: int = JudgeConfig.max_evidence_chars) -> Evidence:
    """What the judge reads of a fact; the body is cut at judge.max_evidence_chars."""
    return {
        "title": fact.title,
        "body": cut(fact.body, max_chars),
        "motifs": list(fact.motifs),
        "sources": list(fact.sources),
    }


def retire(
    corpus: Corpus,
    loser: Fact,
    survivor: Fact,
    verdict_id: str,
    *,
    absorb: bool,
    writes: dict[str, str | None] | None = None,
    carried: list[str] | None = None,
    copy: bool = False,
    relinked: list[str] | None = None,
) -> dict[str, str | None]:
    """The writes that retract `loser` in favour of `survivor` and point every link to it at the survivor.

    The survivor takes in everything of the loser's on a merge (`absorb`), and on a retraction its
    sources, refs and links, never its motifs: a retraction must not leave a citation only in git
    history. It takes the loser's aliases too, and in a corpus linked by name its title (relink.names_taken).
    `carried` gets one line for each key taken in, `relinked` one for each note whose links now name the
    survivor, for the commit body. A `copy` (an exact duplicate) adds nothing to a `sources` count: see
    copy_provenance. Every note of the repository that links to the loser is relinked, in the form each
    link was written (relink.relinked_note), not only the facts the paths read.
    `writes` holds earlier rewrites of the same decision, which these build on (None: a file this
    decision deletes). Only keys whose value changes are rewritten, and only the links that lead to the
    loser, so every other line of every file stays byte-for-byte. The retraction is written as the
    corpus's layout says: a `status: retracted` key, or the file deleted.
    """
    writes = {} if writes is None else writes

    def current(f: Fact) -> Fact:
        """The fact as this decision's earlier writes left it."""
        text = writes.get(f.path)
        return f if text is None else corpus.parse(f.path, text)

    def put(fact: Fact, changes: dict[str, Any]) -> None:
        if changes:
            writes[fact.path] = rewrite(fact.text, changes)

    keep = current(survivor)
    changes = (
        absorbed(keep, loser, corpus.motif_keys)
        if absorb
        else copy_provenance(keep, loser)
        if copy
        else provenance(keep, loser)
    )
    put(keep, changes)
    if carried is not None and changes:
        carried.extend(f"- from {loser.path}: {line}" for line in carried_over(keep, changes))
    writes[loser.path] = retracted(current(loser), survivor.path, verdict_id, corpus.retract)
    vault = vault_of(corpus)
    gone = {path for path, text in writes.items() if text is None}
    by_file_name = False
    for path in sorted(vault.linkers(loser.path)):
        if path == loser.path or path in gone or path in vault.retracted or _retired_here(corpus, writes, path):
            # a retired note keeps its own links (history); a deleted one needs none
            continue
        done = relinked_note(
            vault, path, writes.get(path) or vault.texts[path], old=loser.path, new=survivor.path, gone=gone
        )
        if done.count:
            writes[path] = done.text
            by_file_name |= done.by_file_name
            if relinked is not None:
                relinked.append(f"- {path}: {done.count} link(s) to {loser.path}")
    keep = current(survivor)
    text, names = names_taken(
        vault,
        keep.text,
        keep,
        loser,
        by_file_name=by_file_name,
        titles=titles_are_names(corpus) or by_file_name or bool(loser.aliases),
    )
    if names:
        writes[survivor.path] = text
        if carried is not None:
            carried.append(f"- from {loser.path}: aliases: + {', '.join(names)}")
    return writes


def _retired_here(corpus: Corpus, writes: dict[str, str | None], path: str) -> bool:
    """Whether this decision's earlier writes retract the fact at `path` (an exact group's other copy)."""
    text = writes.get(path)
    if text is None or not corpus.covers(path):
        return False
    try:
        return not corpus.parse(path, text).active
    except BadFact:
        return False


def relinked_body(survivor: str, relinked: list[str]) -> str:
    """The commit body's list of the notes whose links now lead to the survivor (revert restores them)."""
    return f"\n\nRelinked to {survivor}:\n" + "\n".join(relinked) if relinked else ""


def carried_body(survivor: str, carried: list[str]) -> str:
    """The commit body's account of what the survivor took in, so `git log` shows no source was lost."""
    return f"\n\nCarried over into {survivor}:\n" + "\n".join(carried) if carried else ""


class PairOrders(Sequence[Evidence]):
    """Both orders of a pair's evidence, built when first read: most candidates are answered and never are.

    At 100k facts a session meets ~350k pairs; building two evidence dicts for each was a fifth of the
    prune pass on a caught-up corpus.
    """

    def __init__(self, a: Fact, b: Fact, max_chars: int) -> None:
        self.a, self.b, self.max_chars = a, b, max_chars
        self._orders: list[Evidence] | None = None

    def _built(self) -> list[Evidence]:
        if self._orders is None:
            ea, eb = fact_evidence(self.a, self.max_chars), fact_evidence(self.b, self.max_chars)
            self._orders = [{"fact_a": ea, "fact_b": eb}, {"fact_a": eb, "fact_b": ea}]
        return self._orders

    @overload
    def __getitem__(self, i: int) -> Evidence: ...
    @overload
    def __getitem__(self, i: slice) -> list[Evidence]: ...

    def __getitem__(self, i: int | slice) -> Evidence | list[Evidence]:
        return self._built()[i]

    def __len__(self) -> int:
        return 2


class PrunePass:
    """The prune pass: two facts asked whether they are one (merge), or one holds the other (retract)."""

    name = "prune"
    about: About = "facts"
    shape: Shape = "pair"
    default = "distinct"
    yes = {"merge", "retract"}
    # a retract names the redundant fact as the order shows it (in_subject_terms)
    names_side = True
    proposes = False
    labels: tuple[str, ...] = ("distinct", "merge", "retract")
    # (floor, full), worth.py: the lowest true pair scored 0.74 (0.65 in the aekb replay); the floor sits far below,
    # as two instances of one mechanism, worded apart, can score 0.34 and still be a containment
    prior = (0.3, 0.8)
    reads_lines = False
    writes_lines = False
    # a yes is about the facts' content: a changed fact is asked again
    restates_yeses = False
    # A new fact is owed its nearest question in the session that first sees it, whatever the balance
    # (session.freshness.owed_to_fresh): a duplicate's pair ranks by similarity among all pairs, often far down.
    # Discovery is not, and alias only for name matches: on the replay, owing new spellings their nearest
    # spent the alias balance on pairs that rarely merge (48 merges, not 52) and discovery's found nothing.
    owes_questions_to_new = True
    owed_min_score = 0.0

    @property
    def prompt(self) -> Prompt:
        return load_prompt("prune")

    def candidate(self, a: Fact, b: Fact, score: float, max_chars: int) -> Candidate:
        """The question whether facts a and b are one, its evidence built when first read."""
        return Candidate(
            self.name,
            {"a": a.path, "b": b.path},
            pair_fingerprint(a.content_id, b.content_id),
            score,
            PairOrders(a, b, max_chars),
        )

    def candidates(self, ctx: Session) -> list[Candidate]:
        """Each active fact and its nearest neighbours by meaning, best first."""
        facts = ctx.corpus.active()
        if len(facts) < 2:
            return []
        vectors = ctx.embedder.embed([fact_text(f) for f in facts])
        limit = ctx.config.judge.max_evidence_chars
        return [
            self.candidate(facts[i], facts[j], score, limit)
            # one search of the fact vectors serves discovery's deeper groups too (see discovery.groups)
            for i, j, score in neighbour_pairs(
                vectors, ctx.config.shortlist.k, ctx.config.discovery.max_group - 1, ctx.embedder.searcher
            )
        ]

    def restorer(self, ctx: Session) -> Restorer:
        """Makes a candidate read back from candidate_lists, its evidence from the facts (when read)."""
        facts, limit = ctx.corpus.facts, ctx.config.judge.max_evidence_chars

        def restore(s: Subject, fp: str, score: float) -> Candidate:
            return Candidate(self.name, s, fp, score, PairOrders(facts[s["a"]], facts[s["b"]], limit))

        return restore

    def parse(self, text: str) -> Reply:
        """(decision, rationale, payload); a retract's payload names the redundant side as shown: {"redundant": "A"}.

        As the forced tool's schema says: `redundant` is required with retract and absent otherwise, so a
        retract that does not say which fact it retires is unparsed, never left to the fixed rules.
        """
        obj = reply_object(
            text, {"decision": ((str,), True), "redundant": ((str,), False), "rationale": ((str,), False)}
        )
        decision, rationale = obj["decision"], one_sentence(obj.get("rationale"))
        if decision not in ("distinct", "merge", "retract"):
            raise Unparsed(f"'decision' is {decision!r}, not distinct/merge/retract")
        if decision == "retract" and obj.get("redundant") not in ("A", "B"):
            raise Unparsed(
                "'retract' without 'redundant': \"A\" or \"B\""
                if "redundant" not in obj
                else f"'redundant' is {obj['redundant']!r}, not A/B"
            )
        if decision != "retract" and "redundant" in obj:
            raise Unparsed(f"'redundant' with '{decision}': it goes with retract only")
        if decision != "distinct" and not rationale:
            return "distinct", f"'{decision}' without a rationale: recorded as distinct", None
        return decision, rationale, {"redundant": obj["redundant"]} if decision == "retract" else None

    @property
    def default_reply(self) -> dict[str, Any]:
        return {"decision": "distinct", "rationale": ""}

    def label_of(self, answer: str) -> str:
        """The answers are the labels."""
        return answer

    def in_subject_terms(
        self, answer: str, payload: dict[str, Any] | None, subject: Subject, position: int
    ) -> tuple[dict[str, Any] | None, str]:
        """A reply's payload and vote with the redundant side named by its path: order 0 shows subject a as
        fact A, order 1 shows it as fact B. Two orders agree on a retract only when they retire the same fact."""
        if answer != "retract":
            return payload, answer
        # parse() gives every retract its redundant side
        assert payload is not None
        shown = (subject["a"], subject["b"]) if position == 0 else (subject["b"], subject["a"])
        path = shown[0] if payload["redundant"] == "A" else shown[1]
        return {"redundant": path}, f"retract {path}"

    def outdated(self, verdict: Verdict) -> bool:
        """A stored retract that does not name its redundant fact (prune@1): never applied by the fixed rules,
        which could retire the fact that contains the other; the question is asked again instead."""
        named = (verdict.payload or {}).get("redundant")
        return verdict.answer == "retract" and named not in (verdict.subject.get("a"), verdict.subject.get("b"))

    def still_holds(self, verdict: Verdict, corpus: Corpus) -> bool:
        """Both facts still active, with the content the judge read."""
        a, b = (corpus.facts.get(verdict.subject[k]) for k in ("a", "b"))
        if a is None or b is None or not (a.active and b.active):
            return False
        return fingerprint(a.content_id, b.content_id) == verdict.fingerprint

    def restated(self, origin: Verdict, corpus: Corpus, session: str, judge: JudgeKind) -> Verdict | None:
        """Never: a yes is about the facts' content, and a changed fact is asked again."""
        return None

    def change(self, verdict: Verdict, ctx: Session) -> Change:
        """A merge: the fixed rules choose the survivor. A retract: the fact the judge named as redundant is
        retired, whatever those rules say, and the one containing it keeps its whole body."""
        corpus = ctx.corpus
        a, b = corpus.facts[verdict.subject["a"]], corpus.facts[verdict.subject["b"]]
        merge = verdict.answer == "merge"
        if merge:
            keep = fact_survivor([a, b], corpus)
            lose = b if keep is a else a
        else:
            # decide() never gets here with one (review asks it again)
            if self.outdated(verdict):
                raise ValueError(f"verdict {verdict.id}: a retract that names no redundant fact is never applied")
            lose = a if (verdict.payload or {}).get("redundant") == a.path else b
            keep = b if lose is a else a
        carried: list[str] = []
        relinked: list[str] = []
        writes = retire(corpus, lose, keep, verdict.id, absorb=merge, carried=carried, relinked=relinked)
        if merge:
            subject = f"prune: merge {lose.path} into {keep.path}"
            why = f"{keep.path} survives by the fixed rules: {why_survives(keep, lose, corpus)}."
        else:
            subject = f"prune: retract {lose.path} (contained in {keep.path})"
            why = (
                f"The judge named {lose.path} as redundant, wholly contained in {keep.path}, "
                "which keeps its whole body."
            )
        body = "The judge read both facts' titles, bodies, motifs and sources.\n" + why
        return Change(
            writes,
            subject,
            body + carried_body(keep.path, carried) + relinked_body(keep.path, relinked),
            {lose.path: keep.path},
        )
