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


# --- The motif shape (issue 23): knomit's own motif vocabulary -------------------------------------------
# Motifs name a regularity, not a thing. Almost every spelling has one carrier; a true alias is a
# paraphrase that shares no word with its partner and sits on a fact about a different subject; names
# made from one template (X-outlives-Y, fail-closed-X, same-name-different-X) read alike and mean
# different things; two motifs on one fact are two facets of it. Each entry: spellings of one
# mechanism, and one sentence per spelling saying it in other words ({S} is the fact's subject).
PARAPHRASES = [
    (["ancestry-decides-order", "sequence-without-wallclock"],
     ["Which change came first in {S} is answered by walking parent links; the recorded times are shown but never compared.",
      "In {S} the order of two writes is read from the chain of predecessors, not from the clocks of the machines that made them."]),
    (["error-swallowed-as-empty", "broken-call-looks-clean"],
     ["When the lookup in {S} fails it returns an empty list, so the caller reports nothing found instead of an error.",
      "A crash inside {S} hands back a blank result and every dashboard downstream stays green."]),
    (["one-gate-for-all-callers", "single-entry-validation", "shared-checkpoint"],
     ["Every path into {S} passes through one validating function, so no caller can skip or reimplement the rule.",
      "{S} accepts input at exactly one door; the web form, the API and the importer all call it.",
      "The REST handler and the batch job of {S} both reach the same routine before anything is stored."]),
    (["check-inside-lock", "guarded-precondition"],
     ["{S} tests that the target exists while holding the writer's mutex, so nothing can remove it between test and write.",
      "The existence test and the update of {S} happen under one critical section, never one after the other."]),
    (["echo-counted-twice", "duplicate-as-confirmation"],
     ["{S} treats the same report arriving twice as two independent witnesses and raises its confidence.",
      "A repeated copy of one claim in {S} is scored as corroboration although nobody new observed anything."]),
    (["harness-mode-differs", "fixture-skips-real-path"],
     ["The tests of {S} run with a synchronous flag production never sets, so the race they guard cannot occur under test.",
      "Fixtures for {S} take a shortcut the shipped build does not take, and the defect lives on the skipped road."]),
    (["quiet-output-taken-as-pass", "no-news-assumed-good"],
     ["A check over {S} that prints nothing was counted as passing, though it had not run at all.",
      "Nobody noticed that the audit of {S} was silent because it never started; absence of complaints was read as health."]),
    (["late-writer-overrides-setting", "downstream-clobbers-config"],
     ["{S} applies the operator's option first and a library default afterwards, so the option never takes effect.",
      "A hook that runs later in the start-up of {S} quietly replaces the value the configuration asked for."]),
    (["scales-mixed-in-comparison", "units-disagree-silently"],
     ["{S} compares a percentage from one code path with a raw fraction from another, as if both were one measure.",
      "Two numbers in {S} carry the same field name but one is in milliseconds and the other in seconds."]),
    (["enumeration-rots", "list-misses-newcomers"],
     ["{S} names its members explicitly, so anything added later is silently left out until someone edits the list.",
      "New entries never reach {S} because it walks a hand-kept roster written before they existed."]),
    (["retry-amplifies-outage", "backoff-absent-multiplies-load"],
     ["When {S} slows down, every client repeats its request at once and the extra traffic keeps it down.",
      "Without any pause between attempts the callers of {S} triple their load exactly when it can least take it."]),
    (["penalty-prevents-recovery", "punishment-starves-evidence"],
     ["Once {S} is switched off for failing, it stops producing the results that could show it works again.",
      "The sanction applied to {S} removes the very signal its release depends on, so it stays sanctioned forever."]),
]
TEMPLATES = [  # families of look-alike names, each member a different mechanism
    [("handle-outlives-process", "A file handle in {S} survives its owning process and points at a recycled descriptor."),
     ("cache-outlives-schema", "{S} keeps serving cached rows after a migration changed what their columns mean."),
     ("token-outlives-session", "An access token of {S} stays valid after the user signed out of the session that minted it.")],
    [("fail-closed-on-parse", "{S} refuses to start when its configuration file has a syntax error rather than guess."),
     ("fail-closed-registry", "A service unknown to the registry of {S} is denied instead of routed to a default."),
     ("fail-closed-network", "{S} drops every packet when the firewall rules cannot be loaded.")],
    [("same-name-different-unit", "Two dashboards of {S} plot a field called latency, one in p50 and one in p99."),
     ("same-name-different-owner", "Two teams each run a job named nightly in {S} and page each other by mistake."),
     ("same-name-different-version", "{S} loads a plugin by name and picks whichever of two releases is found first.")],
]
FACETS = [  # two motifs of one fact: distinct mechanisms that co-occur
    ("rate-capped-per-window", "overflow-dropped-not-queued",
     "{S} allows a fixed number of runs per minute and discards the excess instead of delaying it."),
    ("handshake-completes-early", "rejection-arrives-later",
     "The client of {S} believes the connection succeeded before the server has judged its certificate."),
    ("debounce-starves-callback", "timer-rearmed-by-input",
     "Each new event re-arms the timer of {S}, so a steady stream postpones the flush indefinitely."),
    ("secret-read-from-file", "redaction-by-type",
     "{S} loads its credential from an owner-only file and prints it masked wherever it is logged."),
    ("symptom-far-from-cause", "crash-site-innocent",
     "{S} crashed in a module that was only the victim of memory corrupted elsewhere."),
]
SINGLES = [  # one carrier each, no partner
    ("lazy-import-hides-cost", "{S} imports its heavy dependency on first use, so start-up looks fast and the first call is slow."),
    ("migration-needs-rebuild", "{S} cannot rename a column in place and copies the table into a new one."),
    ("idempotent-replay", "Applying the same log entry twice to {S} leaves the state unchanged."),
    ("cursor-pagination-drift", "Paging through {S} by offset skips rows when new ones are inserted meanwhile."),
    ("warm-cache-masks-regression", "Benchmarks of {S} ran on a warm cache and missed a slower cold start."),
    ("partial-index-answers", "{S} answers searches from the part of the index already built and says so."),
    ("signature-over-canonical-form", "{S} signs a canonical serialisation so whitespace cannot change the digest."),
    ("clock-skew-expires-token", "A server of {S} with a fast clock rejects tokens that are still valid elsewhere."),
    ("queue-head-blocking", "One slow message at the front of {S} holds every message behind it."),
    ("feature-flag-debt", "Old toggles in {S} are never removed and every code path keeps both branches."),
    ("orphaned-temp-files", "{S} leaves temporary files behind whenever it is killed mid-write."),
    ("config-reload-race", "Reloading the settings of {S} while a request runs mixes old and new values."),
    ("test-order-dependence", "The suite of {S} passes only when its tests run in file order."),
    ("optimistic-lock-conflict", "Two editors of {S} save the same record and the second save is rejected with a version error."),
    ("log-volume-hides-signal", "{S} logs so much at info that the one warning that mattered scrolled away."),
    ("dns-cached-too-long", "{S} keeps a resolved address for hours after the service moved."),
    ("schema-field-unenforced", "A field of {S} is marked required in the schema yet the handler never checks it."),
    ("graceful-shutdown-drains", "{S} stops accepting work and finishes what it holds before exiting."),
    ("unbounded-buffer-growth", "A subscriber of {S} that never reads makes the publisher's buffer grow without limit."),
    ("hot-path-allocation", "{S} allocates a new buffer on every request and the collector dominates the profile."),
]
SUBJECTS = ["the search index", "the billing exporter", "the sync daemon", "the login service", "the job scheduler",
            "the metrics pipeline", "the plugin loader", "the mail relay", "the backup agent", "the config server",
            "the thumbnail worker", "the audit trail", "the payment gateway", "the chat bridge", "the release tool"]
BODY = ["Found while reviewing an incident.", "Measured on the staging cluster.", "Reported by a user; reproduced locally.",
        "Seen twice in one week; the fix is described below.", "Noted during a design review."]


def motif_vocabulary(n: int, seed: int) -> dict:
    """Facts of the motif shape: [(title, body, motifs)], with the truth (groups, traps, facets)."""
    rng = random.Random(seed)
    subjects = SUBJECTS[:]
    facts, groups, traps = [], [], []

    def fact(sentence: str, motifs: list[str]) -> None:
        subject = rng.choice(subjects)
        title = sentence.format(S=subject)
        facts.append((title[:1].upper() + title[1:], f"{title[:1].upper() + title[1:]} {rng.choice(BODY)}", motifs))

    n_groups = max(2, min(len(PARAPHRASES), round(n / 8)))
    for spellings, sentences in rng.sample(PARAPHRASES, n_groups):
        groups.append(list(spellings))
        for spelling, sentence in zip(spellings, sentences):
            fact(sentence, [spelling])  # one carrier each, each about a different subject
    for family in TEMPLATES:
        for name, sentence in family:
            fact(sentence, [name])
        traps += [[a[0], b[0]] for a, b in itertools.combinations(family, 2)]
    for a, b, sentence in FACETS[: max(1, n // 25)]:
        fact(sentence, [a, b])
        traps.append([a, b])
    for name, sentence in SINGLES[: max(0, n - len(facts))]:
        fact(sentence, [name])
    rng.shuffle(facts)
    return {"facts": facts, "groups": groups, "traps": traps}


def write_motifs(out: Path, n: int, seed: int) -> dict:
    """Write the motif-shaped facts and return the truth and the perfect judge's replies."""
    v = motif_vocabulary(n, seed)
    (out / "facts").mkdir(parents=True, exist_ok=True)
    for i, (title, body, motifs) in enumerate(v["facts"]):
        text = (f"---\ntitle: {json.dumps(title)}\nmotifs: {json.dumps(motifs)}\n"
                f"confidence: 0.6\nsources: [session-{i:04d}]\n---\n{body}\n")
        (out / "facts" / f"m{i:04d}.md").write_text(text, encoding="utf-8")
    pairs = [[a, b] for g in v["groups"] for a, b in itertools.combinations(g, 2)]
    truth = {"n": len(v["facts"]), "seed": seed, "shape": "motifs",
             "motif_count": len({m for _, _, ms in v["facts"] for m in ms}), "alias_groups": v["groups"],
             "alias_kinds": ["paraphrase"] * len(v["groups"]), "alias_pairs": pairs, "traps": v["traps"],
             "duplicate_pairs": [], "exact_duplicates": []}
    replies = [{"pass": "alias", "a": a, "b": b,
                "reply": {"same": True, "mechanism": f"'{a}' and '{b}' name one mechanism."}} for a, b in pairs]
    return {"truth": truth, "replies": replies}
