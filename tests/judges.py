"""The loopback judges the tests plant in messages_server.py: replies chosen by reading the prompt as a model
would, and the replies and models they answer with. A responder takes (request, n) and returns an Action.
"""

from __future__ import annotations

import json
import re

from helpers import ALIAS, BACKUP, DEMO, DISCOVERED, GROUP, HEDGE, SAME, SMALL, fact_text
from messages_server import text, tool

# every pass's default reply: nothing to change
DEFAULTS = {
    "alias": {"same": False, "mechanism": ""},
    "prune": {"decision": "distinct", "rationale": ""},
    "discovery": {"entails": False, "fact": None, "rationale": ""},
}
# the alias pair SMALL plants: two spellings of one mechanism
PAIR = ("penalty-blocks-own-recovery", "self-locking-penalty")
DIFFERENT = {"same": False, "mechanism": ""}


def pass_of(request) -> str:
    if "Are fact A and fact B one fact?" in request.prompt:
        return "prune"
    if "Does this group of facts entail" in request.prompt:
        return "discovery"
    return "alias"


def evidence_of(request) -> dict:
    """The evidence block of a prompt, as the judge reads it."""
    return json.loads(re.search(r"<evidence>\n(.*)\n</evidence>", request.prompt, re.S).group(1))


def titles_of(request) -> frozenset:
    ev = evidence_of(request)
    if "facts" in ev:
        return frozenset(f["title"] for f in ev["facts"])
    if "fact_a" in ev:
        return frozenset(ev[k]["title"] for k in ("fact_a", "fact_b"))
    return frozenset()


def asked(request, subject) -> bool:
    return all(f'"spelling": "{m}"' in request.prompt for m in (subject["a"], subject["b"]))


def responder(prune: dict | None = None, discovery: dict | None = None):
    """Answer by reading the prompt: a reply for an exact set of fact titles, else the pass's default."""
    answers = {"prune": prune or {}, "discovery": discovery or {}, "alias": {}}

    def respond(request, n):
        name = pass_of(request)
        reply = answers[name].get(titles_of(request), DEFAULTS[name])
        return text(json.dumps(reply))

    return respond


def alias_responder(same=SAME):
    """'same' only for the planted pair; every other question gets the default."""

    def respond(request, n):
        hit = all(f'"spelling": "{m}"' in request.prompt for m in PAIR)
        return text(json.dumps(same if hit else DIFFERENT))

    return respond


def alias_yes(request, n):
    hit = all(f'"spelling": "{m}"' in request.prompt for m in PAIR)
    return text(json.dumps(SAME if hit else {"same": False, "mechanism": ""}))


# --- the shared remote's judge (tests/test_sync.py) ---------------------------------------------------------
T1 = SMALL["facts/ops/f1.md"].split('"')[1]
T2 = SMALL["facts/ops/f2.md"].split('"')[1]


def respond(req, n):
    """The loopback judge: the two penalty spellings are one, f2 repeats f1; everything else is distinct."""
    name = pass_of(req)
    if name == "alias":
        ev = json.dumps(evidence_of(req))
        same = "self-locking-penalty" in ev and "penalty-blocks-own-recovery" in ev
        return text(
            json.dumps({"same": same, "mechanism": "A penalty removes the signal needed to lift it." if same else ""})
        )
    if name == "prune":
        if titles_of(req) != frozenset({T1, T2}):
            return text(json.dumps({"decision": "distinct", "rationale": ""}))
        # f2 is the redundant one, as shown
        side = "A" if evidence_of(req)["fact_a"]["title"] == T2 else "B"
        return text(json.dumps({"decision": "retract", "redundant": side, "rationale": "f2 repeats f1"}))
    return text(json.dumps({"entails": False, "fact": None, "rationale": ""}))


# --- the THREE corpus's planted yeses (helpers.THREE) -------------------------------------------------------


def quoted(s: str) -> str:
    """How a string appears in the prompt's JSON evidence."""
    return json.dumps(s, ensure_ascii=False)


def planted_reply(prompt: str) -> dict:
    """The judge's answer by what the prompt shows: yes to the three planted questions, the default otherwise."""
    if prompt.startswith("Do motif A and motif B"):
        same = all(f'"spelling": "{m}"' in prompt for m in ALIAS)
        return {"same": same, "mechanism": "A penalty removes the signal needed to lift it." if same else ""}
    if prompt.startswith("Are fact A and fact B"):
        merge = quoted(HEDGE) in prompt and quoted(BACKUP) in prompt
        return {
            "decision": "merge" if merge else "distinct",
            "rationale": "Both report the same hedging result." if merge else "",
        }
    entails = all(quoted(t) in prompt for t in GROUP) and prompt.count('"title":') == 3
    if not entails:
        return {"entails": False, "fact": None, "rationale": ""}
    return {
        "entails": True,
        "rationale": "The rollback of the metrics cluster depends on the metrics cluster.",
        "fact": {
            "title": DISCOVERED,
            "body": "Its rollback is a deploy, which waits on the gate it broke.",
            "motifs": ["rollback-dependency-cycle"],
        },
    }


def planted(request, n):
    """The loopback judge that answers planted_reply."""
    return text(json.dumps(planted_reply(request.prompt)))


# --- the demo corpus's recorded replies, as a model of today answers them (tests/test_models.py) -------------
DEMO_REPLIES = [json.loads(line) for line in (DEMO / "judge-replies.jsonl").read_text().splitlines() if line.strip()]


def evidence(req) -> dict:
    m = re.search(r"<evidence>\n(.*)\n</evidence>", req.prompt, re.S)
    return json.loads(m.group(1)) if m else {}


def demo_judge(req, n):
    """A model that answers the demo's alias questions as its recorded replies do, and the default elsewhere."""
    e = evidence(req)
    if "motif_a" in e:
        pair = {e["motif_a"]["spelling"], e["motif_b"]["spelling"]}
        reply = next(
            (r["reply"] for r in DEMO_REPLIES if r["pass"] == "alias" and {r["a"], r["b"]} == pair), DEFAULTS["alias"]
        )
        return tool(reply)
    return tool(DEFAULTS["prune" if "fact_a" in e else "discovery"])


# --- the describe model's lines (tests/test_describe.py) ----------------------------------------------------
LINES = {
    "penalty-blocks-own-recovery": "A punishment cuts off the signal that would end it, so it never ends.",
    "self-locking-penalty": "A punishment cuts off the signal that would end it, so it lasts for ever.",
    "queue-amplifies-latency": "Waiting work makes each request slower, which makes more work wait.",
}


# --- the first reader and the judge model, their replies and the true pairs (tests/test_first_reader.py) -----
FIRST, STRONG = "claude-haiku-5-5", "claude-sonnet-5-5"
YES = {"same": True, "mechanism": "Both name one mechanism."}
NO = {"same": False, "mechanism": ""}
PENALTY = frozenset(("penalty-blocks-own-recovery", "self-locking-penalty"))
RETRY = frozenset(("retry-storm-amplification", "retry-amplification-cascade"))
RETRY_FACTS = {
    "facts/retry/storm.md": fact_text(
        "Clients that retry an overloaded server multiply its load",
        ["retry-storm-amplification"],
        0.7,
        ["r1"],
        "Each timeout brings a retry, which deepens the overload that caused it.",
    ),
    "facts/retry/cascade.md": fact_text(
        "Retries of slow requests amplify an overload into a cascade",
        ["retry-amplification-cascade"],
        0.6,
        ["r2"],
        "Retrying clients add load exactly when the server is slowest.",
    ),
}
OTHERS = {
    f"facts/m/f{i}.md": fact_text(f"Mechanism {i}: a feedback loop of kind {i}", [f"loop-kind-{i}"]) for i in range(24)
}
