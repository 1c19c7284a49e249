#!/usr/bin/env python3
"""Generate a synthetic knomit corpus with planted alias, trap and duplicate cases, plus ground truth.

    python benchmarks/gen_corpus.py N --seed S --out DIR [--no-git] [--shape mechanisms|entities|motifs]

Writes N facts under DIR/facts/ in one git commit, DIR.truth.json and DIR.replies.jsonl (scripted judge
replies) beside DIR. Pure templating, no models; output and commit id depend only on (N, seed, shape).

--shape mechanisms (the default): mechanism motifs; every planted alias pair is a paraphrase with
disjoint carriers. --shape entities: an entity vocabulary of real shape (gen_vocabulary.py): spelling
variants (case, separators, camelCase, plurals, vendor prefixes, acronyms, Error suffixes) on
different facts, numbered facets and version siblings on the same facts, hundreds of plain names.
--shape motifs: knomit's own motif vocabulary (issue 23): single carriers, aliases that are paraphrases
sharing no word on facts about different subjects, template look-alikes (X-outlives-Y, fail-closed-X,
same-name-different-X) and two facets on one fact; N is capped by the hand-written mechanisms (about 70).
"""

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

# Motif word parts, "canonical/synonym[/synonym]". Canonical words within a slot are chosen to be
# clearly different in meaning, so the only same-mechanism spelling pairs are the planted aliases;
# synonyms are only ever used for those alternate spellings.
SUBJECTS = """penalty/sanction queue/waiting-line buffer/cushion retry/reattempt cache/stash incentive/inducement
alarm/alert quota/allotment subsidy/grant audit/inspection backup/fallback deadline/due-date timeout/time-limit
heuristic/rule-of-thumb forecast/prediction threshold/trigger-level monopoly/sole-supplier shortcut/workaround
checklist/tick-list handoff/handover escalation/referral ranking/league-table lockout/shut-out surplus/excess
shortage/scarcity rumor/hearsay metric/measure target/goal mandate/requirement moratorium/freeze waiver/exemption
rollback/reversion bottleneck/choke-point overload/overburden redundancy/duplication monitoring/surveillance
reputation/standing throttle/rate-limiter tax/duty warranty/guarantee license/permit reorg/restructuring
price-cap/price-ceiling hoarding/stockpiling layoff/dismissal patch/hotfix outage/blackout pilot/trial leak/seepage
drought/dry-spell subcontracting/outsourcing automation/mechanization seniority/tenure auction/bidding hedge/offset
mentorship/coaching""".split()
VERBS = """blocks/prevents amplifies/magnifies delays/postpones masks/obscures erodes/wears-away triggers/sets-off
starves/deprives locks-in/entrenches outpaces/outruns saturates/floods accelerates/speeds-up dampens/softens
crowds-out/displaces rewards/favors resets/clears distorts/skews fragments/splinters concentrates/centralizes
synchronizes/aligns exhausts/depletes inverts/reverses decouples/disconnects hardens/stiffens anchors/pins
overshoots/overruns penalizes/punishes outlasts/outlives misroutes/misdirects destabilizes/unsettles""".split()
OBJECTS = """own-recovery/self-repair own-funding/self-financing latency/response-time demand/uptake
capacity/headroom quality/fidelity trust/credibility maintenance/upkeep detection/discovery throughput/output
error-rate/fault-rate variance/spread learning/adaptation turnover/attrition reserves/holdings cost/expense
safety/protection coordination/alignment morale/team-spirit innovation/experimentation diversity/variety
compliance/adherence resilience/robustness visibility/transparency growth/expansion reporting/disclosure
supply/provision participation/engagement fairness/equity investment/spending oversight/supervision prices/rates
wages/pay yield/harvest coverage/reach staffing/crewing congestion/crowding peak-load/load-spike
baseline/reference-level entry/admission consensus/agreement liquidity/cash-flow attention/focus onboarding/induction
failover/switchover rollout/deployment utilization/usage competition/rivalry specialization/division-of-labor
documentation/records feedback/response-signal hiring/recruitment exploration/search standards/norms
attendance/turnout""".split()
MODIFIERS = """hidden/latent shared/common early/premature long-term/lasting local/regional downstream/later-stage
marginal/incremental informal/unofficial seasonal/periodic collective/group routine/everyday external/outside""".split()
SLOTS = [[e.split("/") for e in part] for part in (SUBJECTS, VERBS, MODIFIERS, OBJECTS)]
MASS = set("""redundancy duplication surveillance overload overburden scarcity excess hearsay seepage automation
mechanization reputation standing seniority tenure mentorship coaching surplus""".split())
# Broad, cross-mechanism tags that facts carry as secondary motifs (like `latch` in the example).
BROAD = """latch positive-feedback negative-feedback delay threshold-effect hysteresis bottleneck goodhart
tragedy-of-the-commons path-dependence cascade oscillation moral-hazard adverse-selection survivorship-bias
tipping-point slow-variable rebound-effect diminishing-returns single-point-of-failure tight-coupling drift
shifting-the-burden success-to-the-successful fixes-that-fail limits-to-growth eroding-goals amplification starvation
synchronization perverse-incentive information-lag principal-agent free-riding lock-in queueing""".split()
# Subject domains, "name: noun, noun, ...". Every fact is one mechanism seen in one domain noun.
DOMAINS = [(d.split(": ")[0], d.split(": ")[1].split(", ")) for d in """\
databases: replica, index, query planner, connection pool, write-ahead log
power grids: feeder, substation, peaker plant, transformer, dispatch desk
fisheries: trawler fleet, spawning stock, quota holder, harbour market, hatchery
hospital staffing: night shift, float pool, charge nurse, ward roster, agency nurse
compilers: optimizer pass, register allocator, inliner, type checker, linker
supply chains: distribution centre, supplier tier, safety stock, freight lane, purchase order
air traffic control: approach sector, holding stack, runway slot, controller team, flow program
urban transit: bus route, timetable, depot, signal block, fare system
agriculture: irrigation scheme, seed bank, grain silo, crop rotation, extension service
central banking: policy rate, reserve requirement, bond desk, discount window, inflation target
software teams: code review, on-call rotation, release train, incident review, design doc
cloud infrastructure: autoscaler, load balancer, availability zone, control plane, spot fleet
forestry: timber concession, firebreak, seedling nursery, canopy survey, logging road
epidemiology: contact tracing team, testing site, case registry, vaccination drive, sentinel clinic
schools: grading policy, homework load, teacher rota, exam board, tutoring program
water utilities: reservoir, treatment plant, pumping station, leak crew, metering program
insurance: claims desk, underwriting model, reinsurance treaty, premium schedule, fraud unit
retail: checkout lane, loyalty scheme, markdown calendar, store layout, shelf stock
manufacturing: assembly line, quality gate, spare parts store, tooling shop, shift supervisor
telecom networks: backbone link, cell tower, peering point, routing table, billing system
emergency dispatch: call centre, ambulance fleet, triage script, dispatch board, standby unit
legal systems: court docket, appeals bench, plea deal, public defender, sentencing guideline
journalism: newsroom, fact-check desk, wire feed, comment section, editorial board
open source projects: maintainer team, issue tracker, contributor pipeline, release branch, steering council
wildlife conservation: ranger post, breeding program, migration corridor, poaching patrol, census survey
housing markets: rental listing, mortgage lender, zoning board, building permit, landlord
scientific publishing: peer review, editorial office, preprint server, citation index, grant panel
elections: polling station, voter roll, ballot design, count centre, campaign office
sports leagues: salary cap, draft system, training camp, referee pool, injury list
mining: ore face, haul truck fleet, ventilation shaft, tailings dam, blasting crew
shipping ports: berth schedule, crane crew, container yard, customs gate, pilot boat
content moderation: report inbox, moderator team, ranking model, appeals process, trust score
customer support: ticket desk, second-line team, help centre, chat bot, support rota
pharmacies: dispensing counter, formulary, drug wholesaler, prescription system, stock room
rail freight: marshalling yard, locomotive pool, track crew, freight timetable, signal box
wind farms: turbine array, grid connection, blade inspection, curtailment order, service vessel
data pipelines: ingest job, schema registry, batch window, stream processor, data warehouse
municipal budgets: road fund, pension fund, capital plan, tax base, budget committee
cybersecurity: patch window, intrusion detector, security operations centre, phishing filter, access review
libraries: lending desk, acquisitions budget, catalogue, reading room, interlibrary loan""".split("\n")]
# (short, long) consequence per mechanism: the short one ends titles, the long one follows "so".
CONSEQUENCES = [s.split(" | ") for s in """\
latches the system off | the system settles into an off state it cannot leave unaided
turns small shocks into outages | small disturbances grow into full outages
hides the problem until it is expensive | the problem stays invisible until fixing it is expensive
makes the fix arrive too late | the correction lands after the damage is done
rewards the wrong behaviour | people learn to optimise the measure instead of the goal
drains the margin it depends on | the slack it relies on is used up first
spreads failure to neighbours | one local failure propagates to its neighbours
oscillates instead of settling | the system swings back and forth instead of settling
locks in an early choice | an early, arbitrary choice becomes permanent
fails silently | failures stop producing any visible signal
grows until it hits a hard limit | growth continues until it slams into a hard limit
shifts the burden onto a quick fix | the quick fix displaces the fundamental solution
starves the slow path | the slower but essential work never gets resources
punishes early reporting | those who report problems early are the ones who pay
turns a buffer into a bottleneck | the protective buffer becomes the constraint
breaks under its own success | the more it is used, the worse it performs
degrades gradually then suddenly | performance erodes slowly and then collapses at once
decouples effort from outcome | extra effort no longer changes the result
masks a slow decline | a steady decline hides behind stable headline numbers
compounds its own error | each round feeds its error back into the next
crowds out voluntary effort | voluntary contributions dry up once the formal scheme starts
diffuses responsibility | everyone assumes someone else is handling it""".split("\n")]
MITIGATIONS = [s.strip() for s in """a manual override is available; load stays well below capacity;
one person owns the problem end to end; the rule is reviewed every quarter; spare capacity is kept in reserve;
the signal is measured independently; people can report problems without blame; feedback arrives within a day;
decisions are staggered; there is a second supplier; the buffer is sized for the worst week;
rewards are tied to outcomes rather than activity; small failures are allowed to happen;
newcomers get protected time; records are kept outside the affected system""".split(";")]
METRICS = [s.strip() for s in """recovery time, error counts, waiting time, unit cost, staff turnover, utilisation,
rework, complaint volume, response time, output per shift, incident counts, spare capacity, defect rates,
overtime hours, stock levels, lead time""".split(",")]
PERIODS = ["week", "month", "quarter", "shift", "season"]
MONTHS = "January February March April May June July August September October November December".split()
# Templates. {S} subject phrase, {V} verb, {O} object phrase, {C}/{L} short/long consequence,
# {D} domain, {N} noun; a trailing underscore capitalises. Any two titles or claims say the same
# thing, so a paraphrase just picks another one; the other sentences come in (wording, rewording) pairs.
TITLES = ["{S_} that {V} {O} {C} at the {N}", "In {D}, {S} {V} {O} at the {N}", "{S_} {V} {O} at the {N}",
          "{N_}: {S} {V} {O}", "How {S} at the {N} {V} {O}", "{D_}, {N}: {S} that {V} {O} {C}",
          "At the {N}, {S} {V} {O} and {C}", "{S_} {V} {O} and {C} ({N})"]
CLAIMS = ["In {D}, {S} at the {N} {V} {O}, so {L}.", "{S_} {V} {O} at the {N} in {D}, and as a result {L}.",
          "At the {N} in {D}, {S} {V} {O}, which means {L}.", "Seen in {D}: {S} {V} {O} at the {N}, so {L}."]
EVIDENCE = [
    ("Across {n} {per}s of records, {metric} at the {N} moved by {pct}% once the pattern set in.",
     "Records from {n} {per}s show a {pct}% shift in {metric} at the {N} after the pattern began."),
    ("{k} of the {n} {N} incidents reviewed in {month} followed this sequence.",
     "Of {n} incidents at the {N} examined in {month}, {k} fit this sequence."),
    ("After the change, {metric} at the {N} took {n} {per}s to return to its earlier level.",
     "It took {n} {per}s for {metric} at the {N} to get back to where it was before the change."),
    ("Logs covering {n} {per}s show {metric} shifting {pct}% before anyone intervened.",
     "Before anyone stepped in, {metric} had already moved {pct}% over {n} {per}s, according to the logs."),
    ("Comparing {n} sites, the effect appeared in {pct}% of them, most clearly in {metric}.",
     "The effect showed up at {pct}% of the {n} sites compared, with {metric} the clearest signal."),
]
EXTRAS = {
    "boundary": [("The effect fades when {mit}.", "It weakens noticeably if {mit}."),
                 ("It does not appear when {mit}.", "Where {mit}, the pattern is absent.")],
    "cross": [("The same shape shows up at the {N2}.", "A similar pattern appears at the {N2} as well."),
              ("A weaker version was seen at the {N2}.", "The {N2} showed the same thing, though less strongly.")],
    "tags": [("It is a case of {tags}.", "This is an instance of {tags}.")],
}
MECHANISM = "{S_} {V} {O}, so {L}."  # the mechanism in one sentence, as the judge states it
FIXED_DATE = "2026-01-01T00:00:00+0000"  # fixed commit dates make the commit id reproducible too


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def spelling(words) -> str:
    return "-".join(w for w in words if w)


def _phrases(words) -> dict:
    """Natural-language pieces of a mechanism wording (subject, verb, modifier, object)."""
    s, v, m, o = words
    noun = s.replace("-", " ")
    art = "" if noun.endswith("ing") or noun in MASS else ("an " if noun[0] in "aeiou" else "a ")
    obj = "its own " + o[4:].replace("-", " ") if o.startswith("own-") else \
        o if o.startswith("self-") else o.replace("-", " ")
    return {"S": art + noun, "V": v.replace("-", " "), "O": f"{m} {obj}" if m else obj}


def _fill(template: str, values: dict) -> str:
    return re.sub(r"\{(\w+?)(_?)\}", lambda m: (_cap if m.group(2) else str)(values[m.group(1)]), template)


def _slug(text: str) -> str:
    slug = "-".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split()[:12])
    return slug if len(slug) <= 80 else slug[:81].rsplit("-", 1)[0]  # whole words only


def _make_mechanisms(rng, count, n_traps):
    """Random distinct (subject, verb, modifier, object) combinations; traps are one-slot variants."""
    mechs, seen = [], set(BROAD)  # spellings so far; distinct spellings imply distinct keys

    def add(key):
        if OBJECTS[key[3]].startswith("own-"):
            key = (*key[:2], None, key[3])  # "hidden its own recovery" does not parse
        words = tuple(SLOTS[i][k][0] if k is not None else None for i, k in enumerate(key))
        if spelling(words) in seen:
            return None
        seen.add(spelling(words))
        mechs.append({"key": key, "words": words, "spell": spelling(words),
                      "cons": rng.choice(CONSEQUENCES), "tags": rng.sample(BROAD, 2)})
        return mechs[-1]

    while len(mechs) < count - n_traps:
        add((rng.randrange(len(SUBJECTS)), rng.randrange(len(VERBS)),
             rng.randrange(len(MODIFIERS)) if rng.random() < 0.3 else None, rng.randrange(len(OBJECTS))))
    traps = []
    for base in rng.sample(mechs, n_traps):
        twin = None
        while not twin:  # the same words but one (mostly the object or the verb): a different mechanism
            key, slot = list(base["key"]), rng.choice([3, 3, 3, 1, 1, 0])
            key[slot] = rng.randrange(len(SLOTS[slot]))
            twin = add(tuple(key))
        while twin["cons"] == base["cons"]:
            twin["cons"] = rng.choice(CONSEQUENCES)
        traps.append((base, twin))
    return mechs, traps


def _alternate(rng, mech, taken):
    """A paraphrased spelling: synonyms for some (at least one) of the word parts."""
    while True:
        words = tuple(w if w is None or rng.random() < 0.4 else rng.choice(SLOTS[i][k][1:])
                      for i, (w, k) in enumerate(zip(mech["words"], mech["key"])))
        if words != mech["words"] and spelling(words) not in taken:
            return words


def _sources(rng, domain, noun, avoid=()):
    """1-3 sources, mostly session ids; none from `avoid`, as a re-filing comes from other sessions."""
    while True:
        out = list(dict.fromkeys(
            f"session-2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}" if rng.random() < 0.75
            else f"https://example.org/{_slug(domain)}/{_slug(noun)}-{rng.randint(1, 999)}"
            for _ in range(rng.choice([1, 1, 2, 2, 3]))))
        if not set(out) & set(avoid):
            return out


def _new_fact(rng, mech, motif, wording, domain, noun):
    """Everything a fact says, as choices; _render turns them into text, _paraphrase re-picks wording."""
    d_name, nouns = DOMAINS[domain]
    n = rng.randint(3, 24)
    extras = [[kind, rng.randrange(len(EXTRAS[kind])), rng.randrange(2)]
              for kind in rng.sample(["boundary", "cross"], rng.choice([0, 1, 1, 2]))]
    tags = rng.sample(mech["tags"], rng.choice([0, 0, 1, 1, 1, 2]))
    if tags and len(extras) < 2 and rng.random() < 0.5:  # at most 4 sentences in all
        extras.append(["tags", 0, rng.randrange(2)])
    return {"mech": mech, "motifs": [motif, *tags], "wording": wording, "domain": domain, "noun": noun,
            "title": rng.randrange(len(TITLES)), "claim": rng.randrange(len(CLAIMS)),
            "evidence": [rng.randrange(len(EVIDENCE)), rng.randrange(2)], "extras": extras,
            "values": {"n": n, "k": rng.randint((n + 1) // 2, n), "pct": rng.randint(8, 85),
                       "per": rng.choice(PERIODS), "metric": rng.choice(METRICS),
                       "month": rng.choice(MONTHS) + " 2026", "mit": rng.choice(MITIGATIONS),
                       "N2": rng.choice([x for x in nouns if x != noun]),
                       "tags": " and ".join(t.replace("-", " ") for t in tags)},
            "confidence": round(rng.uniform(0.3, 0.9), 2), "sources": _sources(rng, d_name, noun)}


def _refiled(rng, fact, **changes):
    """The same fact (or `changes` to its wording) filed again, from other sources."""
    return {**fact, **changes, "confidence": round(rng.uniform(0.3, 0.9), 2),
            "sources": _sources(rng, DOMAINS[fact["domain"]][0], fact["noun"], fact["sources"])}


def _paraphrase(rng, fact):
    """Same mechanism, domain noun and evidence, reworded throughout."""
    other = lambda i, n: (i + rng.randrange(1, n)) % n  # noqa: E731  (any index but i)
    return _refiled(rng, fact, title=other(fact["title"], len(TITLES)), claim=other(fact["claim"], len(CLAIMS)),
                    evidence=[fact["evidence"][0], 1 - fact["evidence"][1]],
                    extras=[[kind, i, 1 - var] for kind, i, var in fact["extras"]])


def _render(fact) -> tuple[str, str]:
    """The file text: front matter (titles plain where YAML allows, as people write them) and body."""
    v = {**_phrases(fact["wording"]), **fact["values"], "D": DOMAINS[fact["domain"]][0], "N": fact["noun"],
         "C": fact["mech"]["cons"][0], "L": fact["mech"]["cons"][1]}
    title = _fill(TITLES[fact["title"]], v)
    ev, var = fact["evidence"]
    body = [_fill(CLAIMS[fact["claim"]], v), _fill(EVIDENCE[ev][var], v)]
    body += [_fill(EXTRAS[kind][i][var], v) for kind, i, var in fact["extras"]]
    quoted = title if re.fullmatch(r"[A-Za-z][^:#\[\]{}\"'`|>&*!%@]*", title) else json.dumps(title)
    front = f"title: {quoted}\nmotifs: [{', '.join(fact['motifs'])}]\nconfidence: {fact['confidence']}\n"
    return title, f"---\n{front}sources: [{', '.join(fact['sources'])}]\n---\n{' '.join(_cap(s) for s in body)}\n"


def generate(n: int, seed: int, out, git: bool = True) -> dict:
    """Write the corpus into `out` (new or empty), its truth and scripted replies beside it; return the truth."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    rng = random.Random(seed)
    floor = min(5, max(1, n // 100))  # "a handful" of each planted case from N=500 up, one below
    n_dup, n_exact = max(floor, round(0.01 * n)), max(floor, round(0.002 * n))
    n_base = n - n_dup - n_exact
    n_mech = max(min(30, n_base // 3), n // 25)
    n_alias, n_traps = max(floor, round(0.02 * n_mech)), max(floor, round(0.01 * n_mech))
    if n_base < n_mech + 5 * n_alias + 2 * n_traps + n_dup + n_exact:
        raise ValueError(f"N={n} is too small for the planted cases")
    mechs, traps = _make_mechanisms(rng, n_mech, n_traps)
    in_trap = {id(m) for pair in traps for m in pair}
    aliased = rng.sample([m for m in mechs if id(m) not in in_trap], n_alias)
    taken = {m["spell"] for m in mechs} | set(BROAD)
    for m in aliased:
        m["alt"] = _alternate(rng, m, taken)
        taken.add(spelling(m["alt"]))
    # carriers per mechanism: skewed (lognormal), at least 6 for an alias (both spellings need some),
    # at most what its domain family can hold with a distinct (domain, noun) per carrier
    counts = [6 if "alt" in m else 1 for m in mechs]
    cap = int(0.6 * sum(len(nouns) for _, nouns in DOMAINS))
    for i in rng.choices(range(n_mech), [rng.lognormvariate(0, 1.0) for _ in mechs], k=n_base - sum(counts)):
        while counts[i] >= cap:
            i = rng.randrange(n_mech)
        counts[i] += 1
    facts = []
    for mech, count in zip(mechs, counts):
        family = rng.sample(range(len(DOMAINS)), min(len(DOMAINS), max(rng.randint(5, 10), math.ceil(count / 3))))
        slots = [(d, noun) for d in family for noun in DOMAINS[d][1]]
        rng.shuffle(slots)  # distinct (domain, noun) per carrier: only planted duplicates repeat one
        n_alt = max(1, min(count - 1, round(count * rng.uniform(0.3, 0.6)))) if "alt" in mech else 0
        for i, (d, noun) in enumerate(slots[:count]):
            alt = i < n_alt  # carriers filed under the alternate spelling mostly word it that way too
            wording = mech["alt"] if alt and rng.random() < 0.7 else mech["words"]
            facts.append(_new_fact(rng, mech, spelling(mech["alt"]) if alt else mech["spell"], wording, d, noun))
    picked = rng.sample(range(len(facts)), n_dup + n_exact)
    dups = [(facts[i], _paraphrase(rng, facts[i])) for i in picked[:n_dup]]
    exacts = [(facts[i], _refiled(rng, facts[i])) for i in picked[n_dup:]]  # same title and body
    everything = facts + [b for _, b in dups + exacts]
    # even spread over ~sqrt(N)/3 folders, never more than 1000 files in one
    n_dirs = max(1, round(math.sqrt(n) / 3), math.ceil(n / 950))
    order = rng.sample(range(len(everything)), len(everything))
    used, paths = {}, {}
    for d in range(n_dirs):
        (out / "facts" / f"part-{d:03d}").mkdir(parents=True, exist_ok=True)
    for pos, i in enumerate(order):
        title, text = _render(everything[i])
        stem = f"facts/part-{pos % n_dirs:03d}/{_slug(title)}"
        used[stem] = used.get(stem, 0) + 1
        paths[i] = path = stem + (f"-{used[stem]}" if used[stem] > 1 else "") + ".md"
        with open(out / path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    if git:
        _commit(out, f"Synthetic corpus: {n} facts, seed {seed}")
    where = {id(f): paths[i] for i, f in enumerate(everything)}
    truth = {
        "n": n, "seed": seed, "mechanisms": n_mech, "motif_count": len({m for f in everything for m in f["motifs"]}),
        "alias_pairs": [[m["spell"], spelling(m["alt"])] for m in aliased],
        "traps": [[a["spell"], b["spell"]] for a, b in traps],
        "duplicate_pairs": [[where[id(a)], where[id(b)]] for a, b in dups],
        "exact_duplicates": [[where[id(a)], where[id(b)]] for a, b in exacts],
    }
    out.with_name(out.name + ".truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    # what a perfect judge answers to each planted question, for scripted-judge benchmarks
    replies = [{"pass": "alias", "a": m["spell"], "b": spelling(m["alt"]),
                "reply": {"same": True, "mechanism": _fill(MECHANISM, {**_phrases(m["words"]), "L": m["cons"][1]})}}
               for m in aliased]
    replies += [{"pass": "alias", "a": a, "b": b, "reply": {"same": False, "mechanism": ""}} for a, b in truth["traps"]]
    for (a, _), (pa, pb) in zip(dups, truth["duplicate_pairs"]):
        p = _phrases(a["wording"])
        why = (f"Both state that {p['S']} {p['V']} {p['O']} at the {a['noun']} in {DOMAINS[a['domain']][0]}, "
               "with the same evidence; the second only rewords the first.")
        replies.append({"pass": "prune", "a": pa, "b": pb, "reply": {"decision": "merge", "rationale": why}})
    with open(out.with_name(out.name + ".replies.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in replies)
    return truth


def generate_entities(n: int, seed: int, out, git: bool = True) -> dict:
    """The entity-vocabulary corpus (see gen_vocabulary.py), with its truth and perfect replies beside it."""
    from gen_vocabulary import write
    return _vocabulary_corpus(write, "entity", n, seed, out, git)


def generate_motifs(n: int, seed: int, out, git: bool = True) -> dict:
    """The motif-vocabulary corpus of knomit's own shape (gen_vocabulary.py), with its truth and perfect replies."""
    from gen_vocabulary import write_motifs
    return _vocabulary_corpus(write_motifs, "motif", n, seed, out, git)


def _vocabulary_corpus(write, kind: str, n: int, seed: int, out, git: bool) -> dict:
    """Write a vocabulary corpus with `write`, commit it, and put its truth and perfect replies beside it."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    made = write(out, n, seed)
    if git:
        _commit(out, f"Synthetic {kind} corpus: {n} facts, seed {seed}")
    out.with_name(out.name + ".truth.json").write_text(json.dumps(made["truth"], indent=1) + "\n")
    with open(out.with_name(out.name + ".replies.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in made["replies"])
    return made["truth"]


def _commit(out: Path, message: str) -> None:
    """One commit of everything via the git CLI (gitpython's index is far slower at 100k files)."""
    env = {**os.environ, "GIT_AUTHOR_DATE": FIXED_DATE, "GIT_COMMITTER_DATE": FIXED_DATE}
    git = ["git", "-c", "user.name=gen", "-c", "user.email=gen@localhost", "-c", "commit.gpgsign=false",
           "-c", "gc.auto=0", "-c", "core.autocrlf=false", "-C", str(out)]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "--no-verify", "-m", message]):
        subprocess.run(git + args, check=True, env=env, stdout=subprocess.DEVNULL)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Generate a synthetic knomit corpus with planted cases.")
    ap.add_argument("n", type=int, help="number of fact files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="corpus directory (new or empty)")
    ap.add_argument("--no-git", action="store_true", help="write the files only, no git repository")
    ap.add_argument("--shape", choices=["mechanisms", "entities", "motifs"], default="mechanisms",
                    help="mechanism motifs (default), an entity vocabulary of real shape, or knomit's motif shape")
    args, start = ap.parse_args(argv), time.monotonic()
    make = {"entities": generate_entities, "motifs": generate_motifs}.get(args.shape, generate)
    truth = make(args.n, args.seed, args.out, git=not args.no_git)
    planted = ", ".join(f"{len(truth[k])} {k}" for k in ("alias_pairs", "traps", "duplicate_pairs", "exact_duplicates"))
    what = f"{len(truth['alias_groups'])} alias groups" if args.shape != "mechanisms" else \
        f"{truth['mechanisms']} mechanisms"
    print(f"{args.out}: {truth['n']} facts, {what}, {truth['motif_count']} motifs; "
          f"{planted}; {time.monotonic() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
