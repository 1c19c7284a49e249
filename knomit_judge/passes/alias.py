"""Alias: do two motif spellings name one mechanism? A yes rewrites the losing spelling everywhere."""

from __future__ import annotations

from ..corpus import renamed_motif
from ..prompts import load_prompt
from ..shortlist import neighbour_pairs
from ..survivors import spelling_survivor
from ..verdicts import fingerprint
from . import Candidate, Change, one_sentence, reply_object

MAX_TITLES = 4


def motif_text(motif: str, corpus) -> str:
    """What a motif is embedded as: its spelling plus up to 4 carrier titles."""
    titles = [f.title for f in corpus.carrier_facts(motif)[:MAX_TITLES]]
    return f"{motif.replace('-', ' ')}: " + "; ".join(titles)


def motif_fingerprint(a: str, b: str, corpus) -> str:
    side = lambda m: [m, sorted(f.content_id for f in corpus.carrier_facts(m))]  # noqa: E731
    return fingerprint(side(a), side(b))


class AliasPass:
    name = "alias"
    default = "different"
    yes = {"same"}

    @property
    def prompt(self):
        return load_prompt("alias")

    def evidence(self, motif: str, corpus) -> dict:
        carriers = corpus.carrier_facts(motif)
        return {"spelling": motif, "carriers": len(carriers), "carrier_titles": [f.title for f in carriers[:MAX_TITLES]]}

    def candidates(self, ctx) -> list[Candidate]:
        corpus = ctx.corpus
        motifs = list(corpus.carriers)
        if len(motifs) < 2:
            return []
        vectors = ctx.embedder.embed([motif_text(m, corpus) for m in motifs])
        out = []
        for i, j, score in neighbour_pairs(vectors, ctx.config.shortlist.k):
            a, b = motifs[i], motifs[j]
            ea, eb = self.evidence(a, corpus), self.evidence(b, corpus)
            out.append(Candidate(self.name, {"a": a, "b": b}, motif_fingerprint(a, b, corpus), score,
                                 [{"motif_a": ea, "motif_b": eb}, {"motif_a": eb, "motif_b": ea}]))
        return out

    def parse(self, text: str):
        obj = reply_object(text, {"same": ((bool,), True), "mechanism": ((str,), False)})
        mechanism = one_sentence(obj.get("mechanism"))
        if obj["same"] and mechanism:
            return "same", mechanism, None
        return "different", ("'same' without a mechanism: recorded as different" if obj["same"] else mechanism), None

    def still_holds(self, verdict, corpus) -> bool:
        s = verdict.subject
        return bool(corpus.carriers.get(s["a"])) and bool(corpus.carriers.get(s["b"])) and \
            motif_fingerprint(s["a"], s["b"], corpus) == verdict.fingerprint

    def change(self, verdict, ctx) -> Change:
        corpus = ctx.corpus
        a, b = verdict.subject["a"], verdict.subject["b"]
        keep = spelling_survivor(a, b, corpus)
        lose = b if keep == a else a
        writes = {}
        for fact in corpus.carrier_facts(lose):
            writes[fact.path] = renamed_motif(fact, lose, keep, corpus.motif_keys)  # inside the key it came from
        titles = {m: [f.title for f in corpus.carrier_facts(m)[:MAX_TITLES]] for m in (a, b)}
        body = (f"The judge read {len(titles[a])} carrier titles of '{a}' and {len(titles[b])} of '{b}'.\n"
                f"'{keep}' survives by the fixed rules; {len(writes)} carrier(s) of '{lose}' rewritten.")
        return Change(writes, f"alias: merge motif '{lose}' into '{keep}'", body)
