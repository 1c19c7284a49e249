"""An entity vocabulary of real shape, for the alias shortlist (gen_corpus.py --shape entities).

Real vocabularies (entity spellings used as motifs) have the opposite shape of the planted mechanism
corpus: two spellings of one thing rarely sit on the same fact, while distinct facets co-occur all
the time. So this corpus plants:

- alias groups, each spelling on DIFFERENT facts: case (Agent Card / agent card), separators
  (fail open / fail-open / fail_open), camelCase (VisibilityTimeout / visibility timeout), plurals,
  vendor prefixes (AWS Step Functions / Step Functions), acronyms (MCP / Model Context Protocol) and
  Error-style suffixes (RateLimitError / rate limit);
- traps: numbered facets that sit on the same facts (asi07 / asi08, govern-6.1 / govern-6.2),
  version siblings (gpt-5.5 / gpt-5.6, p99.9 / p99.99), and names sharing a word (retry budget /
  token budget) among hundreds of plain two-word names.

Pure templating, no models; the output depends only on (N, seed).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

MODIFIERS = """visibility retry circuit rate token context agent tool memory queue cache schema policy access audit
trace prompt model vector embedding batch stream event task workflow state session service resource identity
secret network data log metric alert deploy release feature test review risk control incident budget consent
tenant billing quota shard replica snapshot backup failover routing scheduler worker sandbox guardrail
evaluation approval escalation handoff""".split()
HEADS = """timeout breaker limit budget window card registry store pool policy manager boundary graph index
pipeline gateway router handler loop protocol server client catalog ledger monitor scanner broker
threshold contract checkpoint journal filter validator planner dispatcher tracker cursor""".split()
VENDORS = ["AWS", "Amazon", "Azure", "Google", "Microsoft"]
KINDS = ["case", "separator", "camel", "plural", "prefix", "acronym", "suffix"]
FAMILIES = ["asi{:02d}", "llm{:02d}", "govern-{}.{}", "measure-{}.{}", "ac-{}", "cwe-{}"]
VERSIONED = ["gpt-{}.{}", "claude-{}.{}", "python-3.{}", "tls-1.{}", "p99.{}", "http/{}", "ipv{}", "k8s-1.{}"]
TITLES = ["{A} interacts badly with {B} under load", "How {A} limits {B}", "{A} hides failures in {B}",
          "Why {A} needs its own {B}", "{A} and {B} drift apart after a deploy", "Tuning {A} before {B}",
          "{A} misconfigured: {B} retries forever", "What {A} guarantees and what {B} does not"]
BODIES = ["Seen in production: {A} changed how {B} behaved.", "A review found {A} and {B} coupled more than expected.",
          "The incident report traces the outage to {A}; {B} made it worse.",
          "Measured over a month: {A} moved, {B} followed a week later."]
FIXED_DATE = "2026-01-01T00:00:00+0000"


def _title(name: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in name.split())


def _variant(rng, kind: str, words: list[str]) -> tuple[str, str]:
    """(base spelling, variant spelling) of one alias group of the given kind."""
    name = " ".join(words)
    if kind == "case":
        return name, _title(name)
    if kind == "separator":
        return name, rng.choice(["-", "_"]).join(words)
    if kind == "camel":
        return name, "".join(w.capitalize() for w in words)
    if kind == "plural":
        last = words[-1]
        plural = last[:-1] + "ies" if last.endswith("y") else last + ("es" if last.endswith(("s", "x", "ch")) else "s")
        return "-".join(words), "-".join([*words[:-1], plural])
    if kind == "prefix":
        return _title(name), f"{rng.choice(VENDORS)} {_title(name)}"
    if kind == "acronym":
        return "".join(w[0] for w in words).upper(), _title(name)
    return name, "".join(w.capitalize() for w in words) + rng.choice(["Error", "Exception"])


def vocabulary(n: int, seed: int) -> dict:
    """The spellings, how they sit on facts (bundles: spellings that share a fact), and the truth."""
    rng = random.Random(seed)
    names = [f"{m} {h}" for m, h in itertools.product(MODIFIERS, HEADS)]
    names += [f"{m} {m2} {h}" for m, m2, h in itertools.product(MODIFIERS[:20], MODIFIERS[20:40], HEADS)
              if m != m2] if n > 500 else []
    rng.shuffle(names)
    n_groups = max(len(KINDS), round(n / 13))
    taken: set[str] = set()
    groups, bundles = [], []
    initials_taken: set[str] = set()
    for g in range(n_groups):
        kind = KINDS[g % len(KINDS)]
        if kind == "acronym":  # three words: a two-letter acronym would stand for half the vocabulary
            while True:
                words = [*rng.sample(MODIFIERS, 2), rng.choice(HEADS)]
                if "".join(w[0] for w in words) not in initials_taken and " ".join(words) not in names:
                    break
            initials_taken.add("".join(w[0] for w in words))
        else:
            words = names.pop().split()
        spellings = list(dict.fromkeys(_variant(rng, kind, words)))
        if kind in ("case", "separator") and rng.random() < 0.5:  # some groups have three spellings
            extra = " ".join(words).upper() if kind == "case" else "".join(words)
            if extra not in spellings:
                spellings.append(extra)
        taken.update(spellings)
        groups.append({"kind": kind, "spellings": spellings})
        for s in spellings:  # each spelling on its own facts: never two of a group on one fact
            bundles += [[s] for _ in range(rng.choice([1, 2, 2, 3]))]
    traps = []
    for fmt in FAMILIES[: max(2, min(len(FAMILIES), n // 50))]:
        if fmt.count("{}") == 2:
            members = [fmt.format(a, b) for a in range(1, 4) for b in range(1, 4)]
        else:
            base = rng.randrange(1, 60) if fmt.startswith(("ac", "cwe")) else 1
            members = [fmt.format(base + i) for i in range(8)]
        taken.update(members)
        for i in range(len(members) - 1):
            traps.append([members[i], members[i + 1]])
        # consecutive runs of 2-3 members on one fact, every member at least once
        for start in range(0, len(members), 2):
            bundles.append(members[start:start + rng.choice([2, 3])])
            if rng.random() < 0.5:
                bundles.append(members[start:start + 2])
    for fmt in VERSIONED[: max(3, min(len(VERSIONED), n // 30))]:
        a = rng.randrange(1, 8)
        pair = [fmt.format(a, 5), fmt.format(a, 6)] if fmt.count("{}") == 2 else [fmt.format(a), fmt.format(a + 1)]
        if fmt.startswith("p99"):
            pair = ["p99.9", "p99.99"]
        taken.update(pair)
        traps.append(pair)
        bundles += [list(pair) for _ in range(rng.choice([1, 2]))] + [[pair[0]]]
    # plain names fill the rest: about 3 spellings per fact, as in a real knowledge base
    n_plain = max(0, 3 * n - len(taken))
    plain = [s for s in names if s not in taken][:n_plain]
    for s in plain:
        bundles += [[s] for _ in range(rng.choice([1, 1, 1, 2, 2, 3]))]
    # near-name traps: plain names that share their head word, once on the same fact
    by_head: dict[str, list[str]] = {}
    for s in plain:
        by_head.setdefault(s.split()[-1], []).append(s)
    for head, same in sorted(by_head.items()):
        if len(same) >= 2 and rng.random() < 0.5:
            traps.append(same[:2])
            bundles.append(same[:2])
    return {"groups": groups, "traps": traps, "bundles": bundles, "plain": plain}


def place(rng, n: int, bundles: list[list[str]], groups: list[dict]) -> list[list[str]]:
    """Spread bundles over n facts: each to the emptiest fact that holds no other spelling of its group."""
    group_of = {s: i for i, g in enumerate(groups) for s in g["spellings"]}
    facts: list[list[str]] = [[] for _ in range(n)]
    order = list(range(n))
    rng.shuffle(bundles)
    bundles.sort(key=len, reverse=True)  # the multi-spelling bundles first, while facts are empty
    for bundle in bundles:
        rng.shuffle(order)
        for f in sorted(order, key=lambda i: len(facts[i])):
            here = facts[f]
            clash = any(s in here for s in bundle) or any(
                group_of.get(s) is not None and group_of.get(s) == group_of.get(t) for s in bundle for t in here)
            if not clash:
                here.extend(bundle)
                break
    return facts


def write(out: Path, n: int, seed: int) -> dict:
    """Write the facts and return the truth and the perfect judge's replies."""
    rng = random.Random(seed + 1)
    v = vocabulary(n, seed)
    facts = place(rng, n, v["bundles"], v["groups"])
    (out / "facts").mkdir(parents=True, exist_ok=True)
    for i, motifs in enumerate(facts):
        a, b = (motifs + motifs)[:2] if motifs else ("the system", "the system")
        values = {"A": a, "B": b if b != a else "its neighbours"}
        title = rng.choice(TITLES).format(**values)
        title = title[:1].upper() + title[1:]
        body = rng.choice(BODIES).format(**values)
        text = (f"---\ntitle: {json.dumps(title)}\nmotifs: {json.dumps(motifs)}\n"
                f"confidence: {round(rng.uniform(0.3, 0.9), 2)}\nsources: [session-{i:04d}]\n---\n{body}\n")
        (out / "facts" / f"f{i:04d}.md").write_text(text, encoding="utf-8")
    placed = {m for f in facts for m in f}  # a bundle that fitted nowhere is not in the corpus
    kept = [g for g in v["groups"] if sum(s in placed for s in g["spellings"]) >= 2]
    groups = [[s for s in g["spellings"] if s in placed] for g in kept]
    pairs = [[a, b] for g in groups for a, b in itertools.combinations(g, 2)]
    truth = {"n": n, "seed": seed, "shape": "entities", "motif_count": len(placed),
             "alias_groups": groups, "alias_kinds": [g["kind"] for g in kept], "alias_pairs": pairs,
             "traps": [t for t in v["traps"] if set(t) <= placed], "duplicate_pairs": [], "exact_duplicates": []}
    replies = [{"pass": "alias", "a": a, "b": b,
                "reply": {"same": True, "mechanism": f"'{a}' and '{b}' are two spellings of one name."}}
               for a, b in pairs]
    replies += [{"pass": "alias", "a": a, "b": b, "reply": {"same": False, "mechanism": ""}} for a, b in v["traps"]]
    return {"truth": truth, "replies": replies}
