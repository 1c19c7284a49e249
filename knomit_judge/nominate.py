"""Nomination: which pairs of motif spellings the alias judge is shown, and in what order.

Several signals each nominate every motif's k best partners; the union, deduplicated, is one
candidate list ranked by one score. Signals nominate and rank; only the judge decides.

Signals (each a strength in 0..1 for any pair):
  name      cosine of the two spellings' own embeddings (the name alone, split into words)
  string    the same spelling once case, separators, camelCase, plurals and articles are folded (1.0);
            the same once a vendor/namespace prefix (listed, or a capitalised first word heading 3 or more
            spellings of this vocabulary: Claude Opus 4.8 / Opus 4.8) or an Error-style suffix is set aside, or one is a
            part of the other's "Model Context Protocol (MCP)" (0.9); one word written short in one and
            whole in the other, eval / evaluation, monitor / monitoring (0.85); one is a leading or trailing run
            of the other's words (0.8 x shorter/longer length)
  acronym   one spelling is the initials of the other: NHI / Non-Human Identity, A2A / Agent-to-Agent (0.95)
  carriers  cosine of the spellings embedded with up to 4 carrier titles each (the original signal)
  content   what the carriers say: the mean cosine between the two carrier sets' fact embeddings (title
            and body, the vectors prune already keeps), over the carriers NOT shared by both sides; a
            spelling is nominated beside the k spellings whose carriers' mean vector is nearest
  words     the two names' words aligned to each other (each word to its most similar word on the
            other side, by word embedding), weighted by how rare the word is in this vocabulary: the
            words a template family shares (fail-closed-X, X-outlives-Y, same-name-different-X) are in
            many spellings and weigh little, while synonyms that share no letter (clock / timestamp)
            still meet; a word both names hold that is in 3 or more spellings is set aside (the part a
            family shares), so fail-closed-registry / fail-closed-network compare registry with network.
            Only a strength, computed for pairs other signals nominated.
  line      the spelling's name and its describe line (one sentence the model wrote from its carriers saying
            what it names, session/lines.py), embedded together; only spellings with a line are nominated by
            it and have its strength (a pair without it is scored by the other signals, as before lines existed)
  named     the line of an identifier (a spelling with a number in it) names the other, a name of two or more
            words sharing no word with it (RFC 9421: "the internet standard defining HTTP message
            signatures"). It nominates; for a pair the line signal nominates too, its strength is the line
            cosine and stands alone like string and acronym: the names alone cannot see such a pair, and
            averaged with them it ranks in the hundreds
  gloss     what the carriers say about this spelling: of its carriers' sentences (each carrier's title
            and the first 5 sentences of its body), the 3 nearest to its name's embedding, averaged, plus
            the name's own vector. Two paraphrases that share no word are told apart by what their
            carriers say, and a carrier says much besides: the sentences nearest the name are the ones
            about this spelling. Sentences are embedded (and cached by text) only for spellings with at
            most 4 carriers; one with more is glossed by its carriers text. It nominates each motif's k
            nearest glosses and counts a quarter in the score.

The rank of a pair:
  score = max(string, acronym, named, weighted mean(name, carriers, words, content / 4, gloss / 4, line x 2))
          x (1 - COTAG x overlap)
          x (1/2 if only numbers differ)
  overlap = carriers of both / carriers of the smaller side
Two spellings of one thing rarely sit on the same fact, while distinct facets (numbered clauses,
versions, siblings) co-occur all the time and then look identical by their carrier titles: so shared
carriers and number-only differences (asi07 / asi08, gpt-5.5 / gpt-5.6) lower the rank. They are
still offered in turn, never dropped. Co-tagging is weak evidence against an alias, and it is counted
where it is evidence: content compares only the carriers the two do not share (0 when every carrier is
shared), which also undoes the carriers signal's look of identity for two facets of one fact. On the
labelled knomit sample (benchmarks/data/knomit-kb-motif-labels.json) co-tagged pairs are true more often
than other candidates, so the COTAG factor on top of that is 0 (see COTAG).

String and acronym nomination look partners up in hash buckets of normalised keys, so the cost grows
with the number of spellings, never with its square (vocabularies have 10k+ spellings).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from .corpus import Corpus, Fact, fact_text
from .embeddings import Embedder

SIGNALS = ("name", "string", "acronym", "carriers", "content", "words", "gloss", "line", "named")
# averaged into one evidence; string and acronym stand alone
SEMANTIC = ("name", "carriers", "words", "content", "gloss", "line")
# A semantic signal's weight in the mean (1 unless set). Whole-fact embeddings mostly say what a fact is
# ABOUT (its subsystem), not which regularity it shows: on the labelled knomit sample content at full
# weight put topic neighbours first (median true pair at 61% of the list against 25% without it), at a
# quarter it breaks ties (30%) and still nominates (docs/benchmarks.md, alias candidates on knomit's motifs).
# gloss at a quarter too: on the sample its weight moved the median true pair from 27% of the list (0) to 25%
# (0.25), 23% (0.5) and 22% (1), but on the generated motif shape above 0.25 it ranked worse than without gloss.
# line at twice: the model's line ranks true pairs better than any other signal alone, and on the sample every
# weight chosen with a labelled group held out was 2 or more (2 the lowest; benchmarks/line_weight.py).
WEIGHTS: dict[str, float] = {"content": 0.25, "gloss": 0.25, "line": 2.0}
# gloss nominates: on the labelled knomit sample it lifts recall at k=5 from 25 to 27 of 42 true pairs
# (docs/benchmarks.md, the gloss signal).
# the embedding signals that nominate each motif's k nearest
NOMINATE_BY = ("name", "carriers", "content", "gloss", "line")
MAX_TITLES = 4
# a spelling with more carriers is glossed by its carrier titles (the carriers text)
GLOSS_CARRIERS = 4
# the name's own vector added to the sentences' mean
GLOSS_NAME = 1.0
# the carrier sentences nearest the name that are averaged into its gloss
GLOSS_SENTENCES = 3
_SENTENCE = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z`*(\[])")
# characters: shorter is a fragment, longer is cut
MIN_SENTENCE, MAX_SENTENCE = 20, 600
# The title and the body's first 5 sentences: on the sample, every sentence found no more pairs at 3x the cost.
SENTENCES_PER_FACT = 6
# a word in this many spellings or more, shared by a pair, is a template family's (X-outlives-Y)
FAMILY = 3
# How much a fully shared carrier set lowers the rank, beyond content leaving shared carriers out. Set from
# the labelled knomit sample: 5 of 168 co-tagged pairs are true (3.0%), against 19 of 2,782 other candidates
# (0.7%), and every weight above 0 moved true pairs down (docs/benchmarks.md, alias candidates on
# knomit's motifs): so none.
COTAG = 0.0

# A leading token that names whose product or namespace a thing is, not what it is.
VENDORS = frozenset(
    """amazon aws azure microsoft ms google gcp gcloud apache oracle ibm openai anthropic
meta nvidia github gitlab cloudflare hashicorp redhat salesforce atlassian""".split()
)
# A trailing token that names the kind of report, not the thing: ThrottlingException / throttling.
SUFFIXES = frozenset("error errors exception exceptions err exc fault faults warning warnings".split())
ARTICLES = frozenset("a an the".split())
STOPWORDS = ARTICLES | frozenset("of and for to in on with as by or via".split())
NUMERALS = {"to": "2", "for": "4"}  # A2A = Agent-to-Agent, B4B
SAME, CORE, ACRONYM, EXTENDS = 1.0, 0.9, 0.95, 0.8
# a capitalised first word heading this many spellings is a namespace, as a vendor's name is
NAMESPACE = 3
# One word written short in one spelling and whole in the other, all else equal: capability eval /
# capability evaluation, asynchronous monitor / asynchronous monitoring, eval awareness / evaluation awareness.
# the short word has at least STUB letters, and the long one starts with it
TRUNCATED, STUB = 0.85, 4

# runs between separators (- _ space . / and other punctuation)
_CHUNK = re.compile(r"[^\W_]+")
# camelCase and letter/digit boundaries; an upper-case run before a lone 's' is a plural acronym (LLMs)
_WORD = re.compile(r"[A-Z]{2,}(?=s(?![a-z]))|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_]+")


@dataclass(frozen=True)
class Spelling:
    """A motif spelling taken apart: its words, and the keys it is compared by."""

    # lower-case words, plural 's' of an acronym dropped
    words: tuple[str, ...]
    # the words without separate articles: what the keys are made of
    terms: tuple[str, ...]
    # folded: the terms joined, the last one singular; adjacent digit groups keep a '.' between them
    key: str
    # key without a leading vendor/namespace word or a trailing Error-style word
    core: str
    # key without its digits: equal skeletons, different keys = only numbers differ
    skeleton: str
    # acronym form (one chunk of 2-6 letters/digits), else ''
    short: str
    # initials keys when this reads as an expansion (two or more real words)
    initials: frozenset[str]
    has_digits: bool
    # keys of the parts of "Model Context Protocol (MCP)": each names it too
    aka: frozenset[str] = frozenset()


# words repeat across a vocabulary
@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """Plural and trailing-e folded the same way on both sides: caches/cache, policies/policy, workers/worker.

    Only the last word is stemmed (the plural is on the head noun), so a spelling written as one word
    (cachecard) folds to the same key as its spaced form (cache card).
    """
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("es"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _join(words: Iterable[str]) -> str:
    out = ""
    for w in words:
        if out and w.isdigit() and out[-1].isdigit():
            out += "."
        out += w
    return out


def _key(words: Iterable[str]) -> str:
    """Words joined as one, the last one singular: CacheCards, cache-card and cachecard meet."""
    words = list(words)
    # 2.0 is 2: trailing zero groups of a version add nothing
    while len(words) > 1 and words[-1].strip("0") == "" and words[-2].isdigit():
        words.pop()
    if words:
        words[-1] = _stem(words[-1])
    return _join(words)


def _initials(words: Sequence[str]) -> set[str]:
    real = [w for w in words if w.isalpha() and len(w) > 1]
    if len(real) < 2:
        return set()
    forms = (words, [w for w in words if w not in STOPWORDS], [NUMERALS.get(w, w) for w in words])
    return {"".join(w if w.isdigit() else w[0] for w in form) for form in forms if len(form) > 1}


def _words(chunk: str) -> list[str]:
    """A chunk's words, lower-cased; the plural 's' of an acronym goes (LLMs -> llm, NHIs -> nhi)."""
    out: list[str] = []
    for w in _WORD.findall(chunk):
        if w == "s" and out and len(out[-1]) > 1 and out[-1].isupper():
            continue
        out.append(w)
    return [w.lower() for w in out]


_PAREN = re.compile(r"^(.*?)\s*\(([^()]+)\)\s*$")
_POSSESSIVE = re.compile(r"['\u2019]s\b")


def parse(spelling: str) -> Spelling:
    # Claude's memory / Claude memory
    spelling = _POSSESSIVE.sub("", spelling)
    if (m := _PAREN.match(spelling)) and m.group(1).strip():
        parts = (parse(m.group(1)), parse(m.group(2)))
        whole = parse(f"{m.group(1)} {m.group(2)}")
        return replace(whole, aka=frozenset(p.key for p in parts))
    chunks = _CHUNK.findall(spelling)
    words = tuple(w for c in chunks for w in _words(c)) or (spelling.casefold(),)
    # an article separated by separators is dropped (LLM as a judge / LLM-as-judge), an 'a' inside A2A is not
    terms = tuple(w for c in chunks if c.lower() not in ARTICLES for w in _words(c)) or words
    key = _key(terms)
    core_words = list(terms)
    if len(core_words) > 1 and core_words[0] in VENDORS:
        core_words.pop(0)
    if len(core_words) > 1 and core_words[-1] in SUFFIXES:
        core_words.pop()
    # an acronym is written as one chunk (MCP, A2A, nhi), perhaps after a vendor word (AWS IAM)
    if len(chunks) == 2 and chunks[0].lower() in VENDORS:
        chunks = chunks[1:]
    short = "".join(_words(chunks[0])) if len(chunks) == 1 else ""
    if not (2 <= len(short) <= 6 and any(ch.isalpha() for ch in short)):
        short = ""
    initials = _initials(words) | _initials(core_words)
    return Spelling(
        words,
        terms,
        key,
        _key(core_words),
        re.sub(r"[\d.]", "", key),
        short,
        frozenset(initials),
        any(w.isdigit() for w in words),
    )


def name_text(spelling: str) -> str:
    """What the name signal embeds: the spelling alone, as words (VisibilityTimeout -> visibility timeout)."""
    return " ".join(parse(spelling).words)


def carrier_text(motif: str, corpus: Corpus) -> str:
    """What the carriers signal embeds: the spelling plus up to 4 carrier titles."""
    titles = [f.title for f in corpus.carrier_facts(motif)[:MAX_TITLES]]
    return f"{motif.replace('-', ' ')}: " + "; ".join(titles)


def string_similarity(a: Spelling, b: Spelling) -> float:
    if a.key == b.key:
        return SAME
    if a.core == b.core or a.key in b.aka or b.key in a.aka:
        return CORE
    if truncated(a, b):
        return TRUNCATED
    for long, short in ((a, b), (b, a)):
        if short.key in _affixes(long):
            return EXTENDS * len(short.key) / max(len(long.key), 1)
    return 0.0


def truncated(a: Spelling, b: Spelling) -> bool:
    """The two differ in one word only, and there one is the start of the other (eval / evaluation)."""
    if len(a.terms) != len(b.terms):
        return False
    differ = [(x, y) for x, y in zip(a.terms, b.terms) if x != y]
    if len(differ) != 1:
        return False
    short, long = sorted(differ[0], key=len)
    return len(short) >= STUB and short.isalpha() and long.startswith(short)


def _stubs(s: Spelling) -> set[str]:
    """Bucket keys for truncated(): the terms with one word cut to its first STUB letters, in turn."""
    t = s.terms
    return {" ".join((*t[:i], w[:STUB] + "*", *t[i + 1 :])) for i, w in enumerate(t) if len(w) >= STUB and w.isalpha()}


def _affixes(s: Spelling) -> set[str]:
    """Keys of the spelling's leading and trailing word runs: least privilege in principle of least privilege."""
    t = s.terms
    return {_key(t[i:]) for i in range(1, len(t))} | {_key(t[:i]) for i in range(1, len(t))}


def acronym_similarity(a: Spelling, b: Spelling) -> float:
    if (a.short and a.short in b.initials) or (b.short and b.short in a.initials):
        return ACRONYM
    return 0.0


def numbers_only(a: Spelling, b: Spelling) -> bool:
    """The two differ only in numbers or versions (asi07 / asi08, gpt-5.5 / gpt-5.6, p99.9 / p99.99)."""
    return a.has_digits and b.has_digits and a.key != b.key and a.skeleton == b.skeleton


@dataclass
class Nomination:
    a: str
    b: str
    score: float
    # every signal's strength for this pair
    signals: dict[str, float]
    nominated_by: set[str] = field(default_factory=set)
    # carriers that carry both spellings
    shared: int = 0
    overlap: float = 0.0
    numbers_only: bool = False


def score(strengths: dict[str, float], overlap: float, only_numbers: bool) -> float:
    """The one rank of a pair (see the module docstring); semantic signals absent from `strengths` are left out."""
    weights = [(strengths[s], WEIGHTS.get(s, 1.0)) for s in SEMANTIC if s in strengths]
    semantic = sum(v * w for v, w in weights) / max(1e-9, sum(w for _, w in weights))
    evidence = max(strengths["string"], strengths["acronym"], strengths.get("named", 0.0), semantic)
    return evidence * (1 - COTAG * overlap) * (0.5 if only_numbers else 1.0)


def word_weights(parsed: list[Spelling]) -> dict[str, float]:
    """Each word's weight: log(spellings / spellings holding it); 0 for stop words and a word in every spelling."""
    held = word_counts(parsed)
    n = len(parsed)
    return {w: 0.0 if w in STOPWORDS else math.log(n / c) for w, c in held.items()}


def word_counts(parsed: list[Spelling]) -> dict[str, int]:
    """How many spellings hold each word."""
    held: dict[str, int] = {}
    for s in parsed:
        for w in set(s.words):
            held[w] = held.get(w, 0) + 1
    return held


def word_alignment(
    a: Sequence[str], b: Sequence[str], weight: dict[str, float], vector: dict[str, np.ndarray], family: float = -1.0
) -> float:
    """Rarity-weighted mean over both sides of each word's best cosine with a word of the other side.

    A word both names hold whose weight is at most `family` (it sits in many spellings) is the part a
    template family shares (fail-closed-X, X-outlives-Y): it is set aside on both sides, so what is left
    is compared, the X and the Y. A side left with nothing keeps its words. The default sets nothing aside.
    """
    shared = {w for w in set(a) & set(b) if weight.get(w, 0) <= family + 1e-9}
    a = [w for w in a if weight.get(w, 0) > 0 and w not in shared] or [w for w in a if weight.get(w, 0) > 0] or list(a)
    b = [w for w in b if weight.get(w, 0) > 0 and w not in shared] or [w for w in b if weight.get(w, 0) > 0] or list(b)
    sims = np.array([vector[x] for x in a]) @ np.array([vector[y] for y in b]).T
    wa = np.array([weight.get(x, 0) for x in a]) + 1e-9
    wb = np.array([weight.get(y, 0) for y in b]) + 1e-9
    return float(max(0.0, ((sims.max(1) * wa).sum() / wa.sum() + (sims.max(0) * wb).sum() / wb.sum()) / 2))


def family_weight(n: int) -> float:
    """The weight below which a shared word is a family's: it is in at least FAMILY spellings of n."""
    return math.log(n / FAMILY) if n > FAMILY else 0.0


class CarrierContent:
    """Each motif's carrier facts as embedding sums, so the mean cosine between two carrier sets is one dot product."""

    def __init__(self, motifs: list[str], corpus: Corpus, embedder: Embedder) -> None:
        facts = corpus.active()
        self.row = {f.path: i for i, f in enumerate(facts)}
        self.vectors = embedder.embed([fact_text(f) for f in facts]) if facts else np.zeros((0, 384), np.float32)
        self.carriers = [[self.row[p] for p in corpus.carriers[m] if p in self.row] for m in motifs]
        self.sums = np.array(
            [self.vectors[c].sum(0) if c else np.zeros(self.vectors.shape[1]) for c in self.carriers], dtype=np.float64
        ).reshape(len(motifs), -1)

    def means(self) -> np.ndarray:
        """Each motif's carrier mean, normalised: what content nominates by."""
        norms = np.linalg.norm(self.sums, axis=1, keepdims=True)
        return (self.sums / np.where(norms > 0, norms, 1)).astype(np.float32)

    def similarity(self, i: int, j: int) -> float:
        """Mean cosine between the carriers of i and of j that are not carriers of both (0 when none are left)."""
        shared = set(self.carriers[i]).intersection(self.carriers[j])
        left, right = len(self.carriers[i]) - len(shared), len(self.carriers[j]) - len(shared)
        if not left or not right:
            return 0.0
        both = self.vectors[sorted(shared)].sum(0) if shared else 0.0
        return float(max(0.0, (self.sums[i] - both) @ (self.sums[j] - both) / (left * right)))


def with_namespaces(parsed: list[Spelling], spellings: list[str]) -> list[Spelling]:
    """Spellings whose first word is this vocabulary's namespace get a core without it, as a vendor's would.

    A capitalised first word that heads NAMESPACE or more spellings of several words names a family (Claude
    in Claude Opus 4.8, Claude Code, Claude Agent SDK), so `Opus 4.8` is the same name written without it.
    Learned from the vocabulary rather than listed, since every knowledge base has its own.
    """
    heads: dict[str, int] = {}
    for s, raw in zip(parsed, spellings):
        if len(s.terms) > 1 and raw[:1].isupper():
            heads[s.terms[0]] = heads.get(s.terms[0], 0) + 1
    out = []
    for s, raw in zip(parsed, spellings):
        if len(s.terms) > 1 and raw[:1].isupper() and heads.get(s.terms[0], 0) >= NAMESPACE and s.core == s.key:
            s = replace(s, core=_key(s.terms[1:]))
        out.append(s)
    return out


def sentences(fact: Fact) -> list[str]:
    """The title, then the body's sentences (list markers and heading marks stripped): what a gloss is chosen from."""
    out = [fact.title]
    for line in fact.body.split("\n"):
        line = line.strip().lstrip("-*#> ").strip()
        out.extend(s.strip()[:MAX_SENTENCE] for s in _SENTENCE.split(line) if len(s.strip()) > MIN_SENTENCE)
    return out[:SENTENCES_PER_FACT]


def gloss_vectors(
    motifs: list[str], name_vectors: np.ndarray, titled: np.ndarray, corpus: Corpus, embedder: Embedder
) -> np.ndarray:
    """What the carriers say about each spelling: the mean of the GLOSS_SENTENCES carrier sentences nearest its name.

    Only spellings with at most GLOSS_CARRIERS carriers are glossed from sentences, so the sentences embedded
    (each cached by its text, like every embedding) are those of their carriers, not the whole corpus; a
    spelling with more carriers has enough in its carrier titles and keeps `titled` (its carriers vector).
    The sentences are ranked against the name within the spelling's own carriers only, one small product
    per spelling, so a gloss depends on nothing but the spelling and its carriers' text.
    """
    out = np.array(titled, dtype=np.float32, copy=True)
    few = {i: [f for f in corpus.carrier_facts(m) if f.active] for i, m in enumerate(motifs)}
    few = {i: facts for i, facts in few.items() if 0 < len(facts) <= GLOSS_CARRIERS}
    of_fact: dict[str, list[str]] = {}
    for facts in few.values():
        for f in facts:
            if f.path not in of_fact:
                of_fact[f.path] = sentences(f)
    texts = sorted({t for ts in of_fact.values() for t in ts})
    if not texts:
        return out
    row = {t: i for i, t in enumerate(texts)}
    vectors = embedder.embed(texts).astype(np.float64)
    for i, facts in few.items():
        ids = sorted({row[t] for f in facts for t in of_fact[f.path]})
        sims = vectors[ids] @ name_vectors[i].astype(np.float64)
        best = [ids[x] for x in np.argsort(-sims, kind="stable")[:GLOSS_SENTENCES]]
        mean = vectors[best].mean(0)
        mean = mean / max(np.linalg.norm(mean), 1e-12) + GLOSS_NAME * name_vectors[i]
        out[i] = mean / max(np.linalg.norm(mean), 1e-12)
    return out


def _lexical(parsed: list[Spelling], k: int) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Each motif's k best partners by string and by acronym similarity, found through key buckets."""
    by_key: dict[str, list[int]] = {}
    by_core: dict[str, list[int]] = {}
    by_short: dict[str, list[int]] = {}
    by_initials: dict[str, list[int]] = {}
    by_aka: dict[str, list[int]] = {}
    by_stub: dict[str, list[int]] = {}
    # each spelling's, once: filed under them, then looked up by them
    stubs = [_stubs(s) for s in parsed]
    for i, s in enumerate(parsed):
        by_key.setdefault(s.key, []).append(i)
        for key in stubs[i]:
            by_stub.setdefault(key, []).append(i)
        for key in s.aka:
            by_aka.setdefault(key, []).append(i)
        by_core.setdefault(s.core, []).append(i)
        if s.short:
            by_short.setdefault(s.short, []).append(i)
        for key in s.initials:
            by_initials.setdefault(key, []).append(i)
    string: dict[int, list[int]] = {}
    acronym: dict[int, list[int]] = {}
    for i, s in enumerate(parsed):
        near = set(by_key[s.key]) | set(by_core[s.core]) | set(by_aka.get(s.key, ()))
        for key in s.aka:
            near.update(by_key.get(key, ()))
        for key in _affixes(s):
            near.update(by_key.get(key, ()))
        for key in stubs[i]:
            near.update(by_stub[key])
        near.discard(i)
        string[i] = _best({j: string_similarity(s, parsed[j]) for j in near}, k)
        initials = set(by_initials.get(s.short, ())) if s.short else set()
        for key in s.initials:
            initials.update(by_short.get(key, ()))
        initials.discard(i)
        acronym[i] = _best({j: acronym_similarity(s, parsed[j]) for j in initials}, k)
    return string, acronym


def _best(strength: dict[int, float], k: int) -> list[int]:
    """The k strongest (> 0) of the partners (partner -> strength), ties by index: a look-alike bucket stays bounded."""
    scored = [(-s, j) for j, s in strength.items()]
    return [j for s, j in sorted(scored)[:k] if s < 0]


# a one-word spelling (OAuth, issuer) is named by too many lines to mean anything
NAMED_MIN_WORDS = 2


def _phrase(words: Iterable[str]) -> tuple[str, ...]:
    return tuple(_stem(w) for w in words)


def named_pairs(spellings: list[str], parsed: list[Spelling], lines: dict[int, str]) -> set[tuple[int, int]]:
    """Pairs where the line of an identifier names another spelling that shares no word with it: "RFC 9421:
    the internet standard defining HTTP message signatures" names HTTP Message Signatures.

    An identifier is a spelling with a number in it (RFC 9421, ASI08, CVE-2025-1234): its words say nothing
    of what it names, so only what the model knows of the field joins it to its name. A line of any other
    spelling names related things as often as the thing itself (a product's line names its vendor). The
    named spelling has two or more words as written. Phrases are looked up by their words, so the cost
    grows with the lines' length, never with the square of the vocabulary."""
    index: dict[tuple[str, ...], list[int]] = {}
    for j, sp in enumerate(parsed):
        if len(_CHUNK.findall(spellings[j])) >= NAMED_MIN_WORDS:
            index.setdefault(_phrase(sp.words), []).append(j)
    longest = max((len(k) for k in index), default=0)
    out: set[tuple[int, int]] = set()
    for i, line in lines.items():
        if not parsed[i].has_digits:
            continue
        words = _phrase(_words(line))
        own = set(parsed[i].words)
        for n in range(NAMED_MIN_WORDS, longest + 1):
            for start in range(len(words) - n + 1):
                for j in index.get(words[start : start + n], ()):
                    if j != i and own.isdisjoint(parsed[j].words):
                        out.add((min(i, j), max(i, j)))
    return out


def line_text(spelling: Spelling, line: str) -> str:
    """What the line signal embeds: the name as words, then the line."""
    return f"{' '.join(spelling.words)}: {line}"


def nominate(
    motifs: list[str], corpus: Corpus, embedder: Embedder, k: int, lines: dict[str, str] | None = None
) -> list[Nomination]:
    """Candidate spelling pairs from every signal, deduplicated, best first (ties by spelling order).

    `lines`: spelling -> its describe line, for the spellings that have one.
    """
    n = len(motifs)
    if n < 2:
        return []
    parsed = with_namespaces([parse(m) for m in motifs], motifs)
    name_vectors = embedder.embed([" ".join(s.words) for s in parsed])  # as name_text
    carrier_vectors = embedder.embed([carrier_text(m, corpus) for m in motifs])
    content = CarrierContent(motifs, corpus, embedder)
    gloss = gloss_vectors(motifs, name_vectors, carrier_vectors, corpus, embedder)
    nominated: dict[tuple[int, int], set[str]] = {}

    def add(i: int, j: int, signal: str) -> None:
        if i != j:
            nominated.setdefault((min(i, j), max(i, j)), set()).add(signal)

    lines = lines or {}
    described = [i for i, m in enumerate(motifs) if lines.get(m)]
    line_vectors = np.zeros_like(name_vectors)
    if described:
        line_vectors[described] = embedder.embed([line_text(parsed[i], lines[motifs[i]]) for i in described])
    for signal, vectors, rows in (
        ("name", name_vectors, None),
        ("carriers", carrier_vectors, None),
        ("content", content.means(), None),
        ("gloss", gloss, None),
        ("line", line_vectors[described], described),
    ):
        if signal not in NOMINATE_BY or len(vectors) < 2:
            continue
        idx, _ = embedder.searcher.top_k(vectors, k)
        for i, row in enumerate(idx.tolist()):
            for j in row:
                if rows is None:
                    add(i, j, signal)
                # the line vectors are of the described spellings only
                else:
                    add(rows[i], rows[j], signal)
    named = named_pairs(motifs, parsed, {i: lines[motifs[i]] for i in described})
    for i, j in named:
        add(i, j, "named")
    string, acronym = _lexical(parsed, k)
    for signal, best in (("string", string), ("acronym", acronym)):
        for i, partners in best.items():
            for j in partners:
                add(i, j, signal)

    pairs = sorted(nominated)
    left = np.array([i for i, _ in pairs], dtype=np.int64)
    right = np.array([j for _, j in pairs], dtype=np.int64)
    name_sim = np.clip(np.einsum("ij,ij->i", name_vectors[left], name_vectors[right]), 0, 1).tolist()
    carrier_sim = np.clip(np.einsum("ij,ij->i", carrier_vectors[left], carrier_vectors[right]), 0, 1).tolist()
    gloss_sim = np.clip(np.einsum("ij,ij->i", gloss[left], gloss[right]), 0, 1).tolist()
    line_sim = np.clip(np.einsum("ij,ij->i", line_vectors[left], line_vectors[right]), 0, 1).tolist()
    has_line = set(described)
    carriers = {i: set(corpus.carriers[motifs[i]]) for i in {*left.tolist(), *right.tolist()}}
    weight, family = word_weights(parsed), family_weight(len(parsed))
    words = sorted({w for i in carriers for w in parsed[i].words})
    vector = dict(zip(words, embedder.embed(words)))
    out: list[Nomination] = []
    for (i, j), ns, cs, gs, ls in zip(pairs, name_sim, carrier_sim, gloss_sim, line_sim):
        a, b = parsed[i], parsed[j]
        strengths = {
            "name": ns,
            "string": string_similarity(a, b),
            "acronym": acronym_similarity(a, b),
            "carriers": cs,
            "content": content.similarity(i, j),
            "words": word_alignment(a.words, b.words, weight, vector, family),
            "gloss": gs,
        }
        if i in has_line and j in has_line:
            strengths["line"] = ls
            if (i, j) in named and "line" in nominated[(i, j)]:
                # standing alone, like string and acronym, at what the lines share; only for a pair that is
                # also among the nearest by line: a line names many things besides what its spelling is
                strengths["named"] = ls
        shared = len(carriers[i] & carriers[j])
        overlap = shared / max(1, min(len(carriers[i]), len(carriers[j])))
        only_numbers = numbers_only(a, b)
        out.append(
            Nomination(
                motifs[i],
                motifs[j],
                score(strengths, overlap, only_numbers),
                strengths,
                nominated[(i, j)],
                shared,
                overlap,
                only_numbers,
            )
        )
    order = sorted(range(len(out)), key=lambda x: (-out[x].score, pairs[x]))
    return [out[x] for x in order]
