"""Discovery: does a group of related facts entail a new fact? A yes proposes it, linked, never merged."""

from __future__ import annotations

import heapq
import re
from typing import Any

import numpy as np

from ..config import JudgeConfig
from ..corpus import FACTS_DIR, Corpus, Fact, front_matter
from ..errors import Unparsed
from ..prompts import Prompt, cut, load_prompt
from ..rewrite import yaml_value
from ..shortlist import mean_pairwise
from ..verdicts import JudgeKind, Verdict, group_fingerprint
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
from .prune import fact_text

DISCOVERED_DIR = f"{FACTS_DIR}/discovered"
SOURCE_PREFIX = "knomit-judge:"
EVIDENCE_CHARS = JudgeConfig.max_evidence_chars

# a group of facts by row, and how alike they are (mean pairwise similarity)
Group = tuple[list[int], float]


def proposed(fact: Fact) -> bool:
    """Facts this tool wrote: they never seed a group, so conclusions are not built on conclusions."""
    return any(s.startswith(SOURCE_PREFIX) for s in fact.sources)


def slug(text: str, limit: int = 60) -> str:
    """A file name's stem from a title: lower-case words joined by dashes, at most `limit` long."""
    s = re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-")
    return s[:limit].rstrip("-") or "fact"


def new_fact_path(corpus: Corpus, name: str) -> str:
    """Where a proposed fact goes: <first fact directory>/discovered/, or that directory, if the paths read it."""
    for prefix in corpus.prefixes():
        for path in (f"{prefix}/discovered/{name}", f"{prefix}/{name}") if prefix else (f"discovered/{name}", name):
            if corpus.covers(path):
                return path
    return f"{DISCOVERED_DIR}/{name}"


def proposal_text(
    corpus: Corpus, model: Fact, new: dict[str, Any], *, confidence: float, verdict_id: str, links: list[str]
) -> str:
    """A proposed fact in the shape of `model`, a fact of its group, so the corpus's own tools read it.

    A corpus titled by `#` headings gets a heading (no `title:` key); one that counts its
    sources (knomit's int `sources`) gets a count of 1 and the marker among its `refs`.
    """
    meta = front_matter(model.text)
    marker = f"{SOURCE_PREFIX}{verdict_id}"
    counted = isinstance(meta.get("sources"), int) and not isinstance(meta.get("sources"), bool)
    link_key = "refs" if "refs" in meta and "links" not in meta else "links"
    front: dict[str, Any] = {} if "title" not in meta else {"title": new["title"]}
    front[corpus.motif_keys[0]] = new["motifs"]
    front["confidence"] = confidence
    front["sources"] = 1 if counted else [marker]
    front[link_key] = links
    # the marker that says who wrote it: a ref, since a count has no room for it
    if counted:
        front["refs"] = [*front.get("refs", []), marker]
    body = new["body"] if "title" in meta else f"# {new['title']}\n\n{new['body']}"
    return "---\n" + "".join(f"{k}: {yaml_value(v)}\n" for k, v in front.items()) + "---\n" + body + "\n"


def evidence(members: list[Fact], max_chars: int) -> Evidence:
    """What the judge reads of a group: each fact's title, body (cut at judge.max_evidence_chars) and motifs."""
    return {"facts": [{"title": f.title, "body": cut(f.body, max_chars), "motifs": list(f.motifs)} for f in members]}


def redundant(rows: list[int], counts: dict[int, int], sizes: list[int]) -> bool:
    """Whether a group mostly repeats a kept one: it shares at least 3 facts (or all but one of a smaller
    group) and at least half of the smaller of the two. Such a group asks nearly the question already asked."""
    need = min(3, len(rows) - 1)
    return any(c >= need and 2 * c >= min(len(rows), sizes[h]) for h, c in counts.items())


def distinct(kept: list[Group], candidates: list[Group]) -> list[Group]:
    """`kept` (always kept: the motif groups) plus each candidate, in order, that is not redundant with one kept before it."""
    # fact row -> the kept groups that hold it
    holding: dict[int, list[int]] = {}
    sizes: list[int] = []
    out: list[Group] = []
    for n, (rows, score) in enumerate([*kept, *candidates]):
        counts: dict[int, int] = {}
        for r in rows:
            for h in holding.get(r, ()):
                counts[h] = counts.get(h, 0) + 1
        if n >= len(kept) and redundant(rows, counts, sizes):
            continue
        for r in rows:
            holding.setdefault(r, []).append(len(sizes))
        sizes.append(len(rows))
        out.append((rows, score))
    return out


def spread(groups: list[Group]) -> list[Group]:
    """The groups in offer order: each next one has the best score x share of its facts no earlier group holds.

    Among 20 offers, 20 near copies of one tight cluster teach the judge one thing; a group from a
    part of the corpus not yet shown is worth more. Ties keep the input order (best score first). A
    group's worth only falls as more facts are shown, so stale heap entries are recomputed lazily.
    """
    heap = [(-max(score, 0.0), n) for n, (_, score) in enumerate(groups)]
    heapq.heapify(heap)
    shown: set[int] = set()
    out: list[Group] = []
    while heap:
        _, n = heapq.heappop(heap)
        rows, score = groups[n]
        entry = (-max(score, 0.0) * sum(r not in shown for r in rows) / len(rows), n)
        if heap and entry > heap[0]:
            heapq.heappush(heap, entry)
            continue
        shown.update(rows)
        out.append(groups[n])
    return out


class DiscoveryPass(AnswersAsShown):
    """The discovery pass: a group of related facts asked whether it entails a new fact."""

    name = "discovery"
    about: About = "facts"
    shape: Shape = "group"
    default = "no"
    yes = {"yes"}
    # a yes writes the fact the group entails (proposal_text)
    proposes = True
    labels: tuple[str, ...] = YES_NO
    # (floor, full), worth.py: the lowest group that entailed a fact scored 0.35
    prior = (0.2, 0.5)
    reads_lines = False
    writes_lines = False
    # a yes is about the facts' content: a changed fact is asked again
    restates_yeses = False
    # a new fact's groups wait their turn (see PrunePass.owes_questions_to_new)
    owes_questions_to_new = False
    owed_min_score = 0.0

    @property
    def prompt(self) -> Prompt:
        return load_prompt("discovery")

    def groups(self, ctx: Session) -> list[tuple[list[Fact], float]]:
        """Groups of min..max active facts, in offer order: the carriers of one motif, or a fact and its neighbours.

        A fact's group is it and its max_group - 1 nearest neighbours that reach discovery.group_similarity.
        Groups that mostly repeat a kept one are dropped (redundant), and the rest are offered in spread
        order: the judge sees different areas of the corpus first, not variants of the tightest cluster.
        """
        cfg = ctx.config.discovery
        facts = [f for f in ctx.corpus.active() if not proposed(f)]
        if len(facts) < cfg.min_group:
            return []
        vectors = ctx.embedder.embed([fact_text(f) for f in facts])
        index = {f.path: i for i, f in enumerate(facts)}
        seen: set[frozenset[int]] = set()

        def group(rows: list[int]) -> list[Group]:
            key = frozenset(rows)
            if not cfg.min_group <= len(key) <= cfg.max_group or key in seen:
                return []
            seen.add(key)
            ordered = sorted(key)
            return [(ordered, mean_pairwise(vectors[ordered]))]

        by_motif = [g for paths in ctx.corpus.carriers.values() for g in group([index[p] for p in paths if p in index])]
        idx, sims = ctx.embedder.searcher.top_k(vectors, cfg.max_group - 1)
        near = [
            g
            for i in range(len(facts))
            for g in group([i, *(j for j, s in zip(idx[i].tolist(), sims[i].tolist()) if s >= cfg.group_similarity)])
        ]
        # Largest first, then most coherent: a big group is kept over the smaller ones inside it.
        near.sort(key=lambda g: (-len(g[0]), -g[1], [facts[r].path for r in g[0]]))
        by_motif.sort(key=lambda g: (-g[1], [facts[r].path for r in g[0]]))
        kept = distinct(by_motif, near)
        kept.sort(key=lambda g: (-g[1], [facts[r].path for r in g[0]]))
        return [([facts[r] for r in rows], score) for rows, score in spread(kept)]

    def candidate(self, members: list[Fact], score: float = 0.0, max_chars: int = EVIDENCE_CHARS) -> Candidate:
        """The question about one group (members in corpus order), as review and calibrate both ask it.

        Each body is cut at judge.max_evidence_chars.
        """
        return Candidate(
            self.name,
            {"group": [f.path for f in members]},
            group_fingerprint(members),
            score,
            [evidence(members, max_chars)],
        )

    def restorer(self, ctx: Session) -> Restorer:
        """Makes a candidate read back from candidate_lists, its evidence from the facts again."""
        facts, limit = ctx.corpus.facts, ctx.config.judge.max_evidence_chars

        def restore(s: Subject, fp: str, score: float) -> Candidate:
            return Candidate(self.name, s, fp, score, [evidence([facts[p] for p in s["group"]], limit)])

        return restore

    def candidates(self, ctx: Session) -> list[Candidate]:
        """Every group, in offer order (see groups)."""
        limit = ctx.config.judge.max_evidence_chars
        return [self.candidate(members, score, max_chars=limit) for members, score in self.groups(ctx)]

    @property
    def default_reply(self) -> dict[str, Any]:
        return {"entails": False, "fact": None, "rationale": ""}

    def label_of(self, answer: str) -> str:
        """The answers are the labels: yes or no."""
        return answer

    def parse(self, text: str) -> Reply:
        """yes with a proposed fact (its motifs as slugs), or no."""
        obj = reply_object(
            text, {"entails": ((bool,), True), "fact": ((dict, type(None)), False), "rationale": ((str,), False)}
        )
        rationale = one_sentence(obj.get("rationale"))
        if not obj["entails"]:
            return "no", rationale, None
        fact = obj.get("fact")
        if not isinstance(fact, dict):
            raise Unparsed("'entails' is true but 'fact' is missing")
        title, body, motifs = fact.get("title"), fact.get("body"), fact.get("motifs", [])
        if (
            set(fact) - {"title", "body", "motifs"}
            or not isinstance(title, str)
            or not title.strip()
            or not isinstance(body, str)
            or not isinstance(motifs, list)
            or not all(isinstance(m, str) and re.search(r"\w", m) for m in motifs)
        ):
            raise Unparsed("'fact' must be {title: str, body: str, motifs: [str]}")
        if not rationale:
            return "no", "'entails' without a rationale: recorded as no", None
        # "Feedback Latch" and "feedback-latch" are one
        motifs = list(dict.fromkeys(slug(m, 40) for m in motifs))
        payload = {"title": one_sentence(title), "body": body.strip(), "motifs": motifs}
        return "yes", rationale, payload

    def still_holds(self, verdict: Verdict, corpus: Corpus) -> bool:
        """Every fact of the group still active, with the content the judge read."""
        facts = [corpus.facts.get(p) for p in verdict.subject["group"]]
        held = [f for f in facts if f is not None and f.active]
        return len(held) == len(facts) and group_fingerprint(held) == verdict.fingerprint

    def restated(self, origin: Verdict, corpus: Corpus, session: str, judge: JudgeKind) -> Verdict | None:
        """Never: a yes is about the facts' content, and a changed fact is asked again."""
        return None

    def change(self, verdict: Verdict, ctx: Session) -> Change:
        """The proposed fact, written where the corpus keeps facts and linked to its group and close facts."""
        corpus, cfg = ctx.corpus, ctx.config.discovery
        new = verdict.payload
        # parse() gives every yes its proposed fact
        assert new is not None
        group = list(verdict.subject["group"])
        # Propose and link, never reinforce: a close existing fact is linked, not edited.
        existing = [f for f in corpus.active() if f.path not in group]
        close: list[str] = []
        if existing:
            vectors = ctx.embedder.embed([fact_text(f) for f in existing])
            probe = ctx.embedder.embed([f"{new['title']}\n{new['body']}"])[0]
            sims = vectors @ probe
            close = [
                existing[i].path for i in np.argsort(-sims)[: ctx.config.shortlist.k] if sims[i] >= cfg.match_similarity
            ]
        path = new_fact_path(corpus, f"{slug(new['title'])}.md")
        if path in corpus.facts or (corpus.root / path).exists():
            path = new_fact_path(corpus, f"{slug(new['title'], 47)}-{verdict.id}.md")
        text = proposal_text(
            corpus, corpus.facts[group[0]], new, confidence=cfg.confidence, verdict_id=verdict.id, links=group + close
        )
        body = (
            f"The judge read the titles and bodies of {len(group)} facts:\n"
            + "\n".join(f"- {p}" for p in group)
            + (f"\nClose to existing fact(s), linked and left for the prune pass: {', '.join(close)}" if close else "")
        )
        return Change({path: text}, f"discovery: propose {path}", body)
