"""Calibration: the judge's answers to human-labelled questions, scored against the labels.

Each labelled question is built exactly as its pass builds it (same evidence, same
fingerprint). It is answered by the stored verdict when one matches (same fingerprint,
model and prompt version), else asked through the Judge and its reply cache, so a rerun
costs nothing. Calibration decides nothing: no change is applied or committed, and its
answers are not verdicts, so they go to neither the verdict table nor the journal (they
would otherwise count towards the throttle and stand in for review's own questions).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import audits
from .config import Config, load_config
from .corpus import Corpus, load_corpus
from .errors import BadLabelledQuestion, ConfigError, JudgeRefused, Unparsed
from .gitops import open_repo
from .jsonl import read_jsonl
from .judge import Judge, JudgeSpec, Ledger, make_backend, read_sample
from .labels import LABELS_FILE, latest, read_labels
from .models import require_callable
from .passes import JUDGED_PASSES, Candidate
from .passes.alias import AliasPass
from .passes.base import YES_NO, Pass
from .passes.discovery import DiscoveryPass
from .passes.prune import PrunePass
from .passes.registry import all_passes, answered
from .store import Store
from .verdicts import Journal, now_text

# A retract of the fact a retract label says contains the other: a yes, but not the labelled decision.
WRONG_SIDE = "retract (the other fact)"


@dataclass
class Question:
    line: int
    pass_name: str
    subject: dict[str, Any]
    # alias, discovery: yes/no; prune: distinct/merge/retract
    label: str
    # None: scored from the journal's verdict, never asked
    candidate: Candidate | None
    # a prune retract label may name the redundant fact (its path here)
    redundant: str | None = None
    # stored | asked | unavailable | unparsed | not asked
    source: str = "not asked"
    answer: str | None = None  # in the label's terms
    # each order's majority in the label's terms ("retract <path>")
    by_position: list[str] = field(default_factory=list)
    agreement: float | None = None
    rationale: str = ""
    error: str = ""

    def json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "pass": self.pass_name,
            "subject": self.subject,
            "label": self.label,
            "answer": self.answer,
            "by_position": self.by_position,
            "source": self.source,
            "agreement": self.agreement,
            "rationale": self.rationale,
            **({"error": self.error} if self.error else {}),
        }


def side_checked(q: Question, answer: str, payload: dict[str, Any] | None) -> str:
    """A retract answer on a retract label that names the redundant fact: WRONG_SIDE when it retires the other."""
    if answer == "retract" and q.redundant and (payload or {}).get("redundant") != q.redundant:
        return WRONG_SIDE
    return answer


def is_yes(category: str) -> bool:
    """A yes label or answer; an order's prune retract names its fact ("retract facts/x.md") and is one too."""
    return category in ("yes", "merge", "retract") or category.startswith("retract ")


def read_labelled_questions(path: Path, passes: Mapping[str, Pass]) -> list[tuple[int, dict[str, Any]]]:
    """The labels file's questions with their line numbers; a malformed line is an error naming it."""
    out = []
    for n, entry in read_jsonl(path, BadLabelledQuestion):
        problem = _label_problem(entry, passes)
        if problem or not isinstance(entry, dict):
            raise BadLabelledQuestion(f"{path}:{n}: {problem}")
        out.append((n, entry))
    return out


def _label_problem(entry: object, passes: Mapping[str, Pass]) -> str:
    if not isinstance(entry, dict) or entry.get("pass") not in JUDGED_PASSES:
        return f"'pass' must be one of {', '.join(JUDGED_PASSES)}"
    p, label = passes[entry["pass"]], entry.get("label")
    if p.shape == "group":
        group = entry.get("group")
        if not isinstance(group, list) or len(set(group)) < 2 or not all(isinstance(x, str) for x in group):
            return "'group' must list at least two fact paths"
    elif not (isinstance(entry.get("a"), str) and isinstance(entry.get("b"), str)) or entry["a"] == entry["b"]:
        return "'a' and 'b' must be two different strings"
    if p.names_side and "redundant" in entry and (label != "retract" or entry["redundant"] not in ("A", "B")):
        return '\'redundant\' goes with a retract label only: "A" (the entry\'s a) or "B" (its b)'
    if p.labels == YES_NO:  # said true or false
        return "" if isinstance(label, bool) else "'label' must be true or false"
    return "" if label in p.labels else f"'label' must be one of {', '.join(p.labels)}"


def label_text(p: Pass, label: object) -> str:
    """A labels file's label in its pass's terms: true/false as yes/no, a word as it is."""
    if p.labels == YES_NO:
        return "yes" if label else "no"
    return str(label)


def build(
    entry: dict[str, Any], corpus: Corpus, passes: Mapping[str, Pass], max_chars: int
) -> tuple[Candidate | None, str, str]:
    """The Candidate the pass would build for this labelled question, or (None, missing thing, reason)."""
    p = passes[entry["pass"]]
    if isinstance(p, AliasPass):
        a, b = entry["a"], entry["b"]
        for m in (a, b):
            if not corpus.carriers.get(m):
                return None, m, f"spelling {m!r} has no active carrier in the corpus"
        return p.candidate(a, b, corpus, 0.0), "", ""
    paths = entry["group"] if isinstance(p, DiscoveryPass) else [entry["a"], entry["b"]]
    for path in paths:
        fact = corpus.facts.get(path)
        if fact is None or not fact.active:
            return None, path, f"fact {path} is {'not in the corpus' if fact is None else 'retracted'}"
    if isinstance(p, DiscoveryPass):
        # in corpus order, as the pass builds its groups
        return p.candidate([corpus.facts[path] for path in sorted(set(paths))], max_chars=max_chars), "", ""
    # _label_problem admits the judged passes only
    assert isinstance(p, PrunePass)
    return p.candidate(corpus.facts[paths[0]], corpus.facts[paths[1]], 0.0, max_chars), "", ""


def cached_positions(p: Pass, c: Candidate, judge: Judge) -> list[str]:
    """Each asked order's majority from the reply cache alone: [first] when only the first order was asked,
    [first, second] when both were, [] when the first order's replies are missing."""
    by_position: dict[int, list[str]] = {}
    # the requests the judge would make, so the same cache keys
    for ask in judge.asks(p, c):
        hit = judge.store.cached_reply(ask.key)
        if not hit:
            if ask.position == 0:
                return []
            # this order was not asked (or not wholly): it has no answer
            by_position.pop(ask.position, None)
            break
        try:
            by_position.setdefault(ask.position, []).append(read_sample(p, hit["text"], c.subject, ask.position).vote)
        except Unparsed:
            return []
    return [Counter(answers).most_common(1)[0][0] for _, answers in sorted(by_position.items())]


def ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa of (label, answer) pairs; None when chance agreement is total or there are none."""
    n = len(pairs)
    if not n:
        return None
    labels, answers = Counter(l for l, _ in pairs), Counter(a for _, a in pairs)
    observed = sum(l == a for l, a in pairs) / n
    chance = sum(labels[c] * answers[c] for c in labels) / n / n
    return round((observed - chance) / (1 - chance), 4) if chance < 1 else None


def score(p: Pass, questions: list[Question], ledger: Ledger | None) -> dict[str, Any]:
    """One pass's numbers: precision/recall of yes, agreement and kappa, flips, agreement spread, cost."""
    answered = [q for q in questions if q.answer is not None]
    pairs = [(q.label, q.answer) for q in questions if q.answer is not None]
    tp = sum(is_yes(l) and is_yes(a) for l, a in pairs)
    fp = sum(not is_yes(l) and is_yes(a) for l, a in pairs)
    fn = sum(is_yes(l) and not is_yes(a) for l, a in pairs)
    # The flip rate is read where review reads it: questions whose first order gave the default and were
    # asked in both orders anyway (the swap sample). A question whose first order was a yes is always asked
    # in both, and a yes that the second order overturns is a split, counted apart.
    swapped = [q for q in answered if len(q.by_position) == 2 and not is_yes(q.by_position[0])]
    flips = [q for q in swapped if q.by_position[0] != q.by_position[1]]
    yes_first = [q for q in answered if len(q.by_position) == 2 and is_yes(q.by_position[0])]
    splits = [q for q in yes_first if q.by_position[0] != q.by_position[1]]
    return {
        "n": len(answered),
        "labelled": len(questions),
        "precision": ratio(tp, tp + fp),
        "recall": ratio(tp, tp + fn),
        "agreement": ratio(sum(l == a for l, a in pairs), len(pairs)),
        "kappa": kappa(pairs),
        "kappa_over": "/".join(p.labels),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": len(pairs) - tp - fp - fn,
        # discovery asks one order only, so it has no flips to measure
        "flip_rate": ratio(len(flips), len(swapped)),
        "flips": len(flips),
        "flip_measured": len(swapped),
        "splits": len(splits),
        "yes_first": len(yes_first),
        "wrong_side": sum(q.answer == WRONG_SIDE for q in answered),  # retracts of the container
        "orders": dict(sorted(Counter(str(len(q.by_position)) for q in answered if q.by_position).items())),
        "sample_agreement": dict(
            sorted(Counter(f"{q.agreement:.2f}" for q in answered if q.agreement is not None).items())
        ),
        "stored": sum(q.source == "stored" for q in questions),
        "asked": sum(q.source == "asked" for q in questions),
        "unavailable": sum(q.source == "unavailable" for q in questions),
        "unparsed": sum(q.source == "unparsed" for q in questions),
        "not_asked": sum(q.source == "not asked" for q in questions),
        "judge_calls": ledger.calls if ledger else 0,
        "cost_usd": (None if ledger.cost_usd is None else round(ledger.cost_usd, 6)) if ledger else 0.0,
    }


def calibrate(
    labels_path: Path | str, root: Path | str = ".", judge_spec: str = "anthropic", config: Config | None = None
) -> dict[str, Any]:
    """Score the judge against the labels (the library API behind `knomit-judge calibrate`); applies nothing."""
    spec = JudgeSpec.parse(judge_spec)
    root = Path(root).resolve()
    open_repo(root)
    passes = all_passes()
    entries = read_labelled_questions(Path(labels_path), passes)
    config = config or load_config(root)
    # Measuring is what calibrate is for: every labelled pair it asks is in its swap sample (both orders),
    # whatever the corpus's own setting. Stored verdicts it reuses keep the orders review asked.
    swap_was = config.judge.position_swap
    config = dataclasses.replace(config, judge=dataclasses.replace(config.judge, position_swap=True, swap_sample=1.0))
    corpus = load_corpus(root, config.corpus.max_fact_bytes, layout=config.corpus)
    questions, skipped = [], []
    for n, entry in entries:
        c, missing, reason = build(entry, corpus, passes, config.judge.max_evidence_chars)
        if c is None:
            skipped.append({"line": n, "pass": entry["pass"], "missing": missing, "reason": reason})
            continue
        label = label_text(passes[entry["pass"]], entry["label"])
        redundant = entry.get("redundant") and entry["a" if entry["redundant"] == "A" else "b"]
        questions.append(Question(n, entry["pass"], c.subject, label, c, redundant=redundant))
    with Store.for_corpus(root) as store:
        # the models' lifecycle and dialects, as a session reads them (a retired model exits 2 here too, said as
        # retired: before the price, which a retired model does not have)
        lineup = require_callable(config, store) if spec.anthropic else None
        if spec.anthropic:
            # judge.max_cost_usd holds here too: the price must be known
            config.require_price(config.judge.model)
        judge = Judge(make_backend(spec, config, lineup, answers=answered()), store, config)
        try:
            asyncio.run(_answer(questions, passes, judge, store, config))
        # a 404 naming the model: read it again, and say "retired" when it is
        except JudgeRefused as e:
            if gone := lineup and e.model and lineup.gone(e.model):
                raise ConfigError(gone) from None
            raise
        result = {
            "labels": str(labels_path),
            "corpus": str(root),
            "judge": judge.model,
            "created_at": now_text(),
            "prompts": {name: passes[name].prompt.id for name in JUDGED_PASSES},
            "position_swap": {"asked_both_orders": True, "configured": swap_was},
            "passes": {
                name: score(passes[name], [q for q in questions if q.pass_name == name], judge.ledgers.get(name))
                for name in JUDGED_PASSES
            },
            "skipped": skipped,
            "questions": [q.json() for q in questions],
        }
        result["overall"] = overall(questions)
        result["first_reader"] = first_reader_score(store)
        store.add_calibration(result)
    return result


def calibrate_journal(root: Path | str = ".") -> dict[str, Any]:
    """Score the stored verdicts against the labels people gave them with `label` (no labels file, no judge call).

    The labels journal answers in yes/no, so every pass (prune too) is scored over yes/no, on the verdict
    each label was given: how right the judge was on the questions it actually answered.
    """
    root = Path(root).resolve()
    open_repo(root)
    verdicts = {v.id: v for v in Journal(root).verdicts()[0]}
    labelled = latest(read_labels(root))
    questions: list[Question] = []
    skipped: list[dict[str, Any]] = []
    # n: the label's place, as a file's line number would be
    for n, lab in enumerate(labelled.values(), 1):
        v = verdicts.get(lab.verdict)
        if v is None or v.pass_name not in JUDGED_PASSES:
            why = "not in the journal" if v is None else "mechanical"
            skipped.append(
                {"line": n, "pass": lab.pass_name, "missing": lab.verdict, "reason": f"verdict {lab.verdict} is {why}"}
            )
            continue
        questions.append(
            Question(
                n,
                v.pass_name,
                v.subject,
                lab.label,
                None,
                source="stored",
                answer="yes" if v.is_yes else "no",
                agreement=v.agreement,
                rationale=v.rationale,
            )
        )
    models = sorted({verdicts[vid].model for vid in labelled if vid in verdicts})
    result = {
        "labels": f"{LABELS_FILE} (journal)",
        "corpus": str(root),
        "judge": ", ".join(models) or "-",
        "created_at": now_text(),
        "source": "journal",
        "prompts": {
            name: sorted({v.prompt for v in verdicts.values() if v.pass_name == name}) for name in JUDGED_PASSES
        },
        "position_swap": {"asked_both_orders": False, "configured": load_config(root).judge.position_swap},
        "passes": {
            name: {**score(p, [q for q in questions if q.pass_name == name], None), "kappa_over": "yes/no"}
            for name, p in all_passes().items()
        },
        "skipped": skipped,
        "questions": [q.json() for q in questions],
    }
    result["overall"] = overall(questions)
    with Store.for_corpus(root) as store:
        result["first_reader"] = first_reader_score(store)
        store.add_calibration(result)
    return result


def first_reader_score(store: Store) -> dict[str, dict[str, Any]]:
    """The first reader scored against the judge model over every audit and confirmation kept (session/rereads.py):
    its no's the judge model read again and how many it missed; its yeses and how many the judge model shared."""
    out: dict[str, dict[str, Any]] = {}
    for name, kinds in store.audit_totals().items():
        read_again, confirms = kinds.get("audit", {}), kinds.get("confirm", {})
        n, missed = sum(read_again.values()), read_again.get(True, 0)
        out[name] = {
            "audits": n,
            "misses": missed,
            "miss_rate": round(missed / n, 4) if n else None,
            "yeses": sum(confirms.values()),
        }
    for name, confirmed in store.db.execute(
        "SELECT pass, count(*) FROM audits WHERE kind = 'confirm' AND strong_answer = first_answer GROUP BY pass"
    ):
        out[name]["confirmed"] = confirmed
    for name, model in store.db.execute(
        "SELECT pass, first_model FROM audits a WHERE rowid = (SELECT max(rowid) FROM audits b WHERE b.pass = a.pass)"
    ).fetchall():
        # the latest first reader's window, as `status` publishes it: the estimate and the bound (audits.py)
        e = audits.estimate(store, name, model)
        out[name].update(
            {
                "model": model,
                "recall": e.recall,
                "recall_low": e.recall_low,
                "misses_estimated": e.misses_estimated,
                "window": audits.WINDOW,
            }
        )
    return out


def overall(questions: list[Question]) -> dict[str, Any]:
    """Precision, recall and yes/no agreement over every pass together."""
    pairs = [(is_yes(q.label), is_yes(q.answer)) for q in questions if q.answer is not None]
    tp = sum(l and a for l, a in pairs)
    return {
        "n": len(pairs),
        "precision": ratio(tp, sum(a for _, a in pairs)),
        "recall": ratio(tp, sum(l for l, _ in pairs)),
        "agreement": ratio(sum(l == a for l, a in pairs), len(pairs)),
    }


async def _answer(
    questions: list[Question], passes: Mapping[str, Pass], judge: Judge, store: Store, config: Config
) -> None:
    cfg = config.judge
    gate = asyncio.Semaphore(cfg.concurrency)

    async def one(q: Question) -> None:
        p, c = passes[q.pass_name], q.candidate
        # calibrate asks only the questions it built
        assert c is not None
        v = store.verdict_for(p.name, c.fingerprint)
        if v and v.model == judge.model and v.prompt == p.prompt.id:
            q.source, q.answer = "stored", side_checked(q, p.label_of(v.answer), v.payload)
            q.agreement, q.rationale = v.agreement, v.rationale
            # recorded, else (older) from the cache
            asked = v.by_position or cached_positions(p, c, judge)
            q.by_position = [p.label_of(a) for a in asked]
            return
        async with gate:
            # the session cost cap holds here too; the rest stays unasked
            if judge.spent() >= cfg.max_cost_usd:
                q.error = f"judge.max_cost_usd ${cfg.max_cost_usd:g} reached"
                return
            out = await judge.ask(p, c)
        if out.kind != "verdict":
            q.source, q.error = out.kind, out.error
            return
        # a verdict's outcome carries its answer
        assert out.answer is not None
        q.source, q.answer = "asked", side_checked(q, p.label_of(out.answer), out.payload)
        q.agreement, q.rationale = out.agreement, out.rationale
        q.by_position = [p.label_of(a) for a in out.by_position]

    await asyncio.gather(*(one(q) for q in questions))


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _cost(x: float | None) -> str:
    return "incomplete" if x is None else f"${x:.4f}"


def subject_text(subject: dict[str, Any]) -> str:
    return ", ".join(subject["group"]) if "group" in subject else f"{subject['a']} / {subject['b']}"


def calibration_lines(result: dict[str, Any]) -> list[str]:
    """The calibration as text: one table row per pass, then what disagreed, flipped or was skipped."""
    out = [
        f"calibration of {result['judge']} against {result['labels']} "
        f"({sum(p['labelled'] for p in result['passes'].values())} questions, {len(result['skipped'])} skipped)",
        f"{'pass':<10} {'n':>3} {'precision':>9} {'recall':>6} {'agreement':>9} {'kappa':>6} "
        f"{'flip rate':>13} {'calls':>5} {'cost':>10}",
    ]
    for name, s in result["passes"].items():
        flips = f"{_num(s['flip_rate'])} ({s['flips']}/{s['flip_measured']})" if s["flip_measured"] else "-"
        out.append(
            f"{name:<10} {s['n']:>3} {_num(s['precision']):>9} {_num(s['recall']):>6} "
            f"{_num(s['agreement']):>9} {_num(s['kappa']):>6} {flips:>13} {s['judge_calls']:>5} "
            f"{_cost(s['cost_usd']):>10}"
        )
    for name, f in (result.get("first_reader") or {}).items():
        out.append(
            f"first reader on {name}: {f['audits']} audits of its no's, {f['misses']} missed "
            f"(miss rate {_num(f['miss_rate'])}); {f.get('confirmed', 0)} of its {f['yeses']} yeses confirmed "
            "by the judge model"
        )
        if f.get("model"):
            low = audits.bound_text(f["recall_low"])
            out.append(f"  over the last {f['window']} sessions: estimated recall {_num(f['recall'])}, {low}")
    o = result["overall"]
    out.append(f"{'all':<10} {o['n']:>3} {_num(o['precision']):>9} {_num(o['recall']):>6} {_num(o['agreement']):>9}")
    out.append(
        "precision and recall are of yes (prune: merge or retract); agreement and kappa are over "
        + ", ".join(f"{n} {s['kappa_over']}" for n, s in result["passes"].items())
    )
    if result.get("source") == "journal":
        out.append("scored: the stored verdicts the labels were given on, as the judge answered them (no call)")
    else:
        out.append(
            "both orders of every pair calibrate asked were asked (its swap sample is every question); "
            "a split records the default"
            + ("" if result["position_swap"]["configured"] else " (this corpus has judge.position_swap off)")
        )
    out.append(
        "flip rate: of the pairs whose first order gave the default and were asked in both orders, "
        "the share whose second order did not"
    )
    spread = "; ".join(
        f"{n} " + ", ".join(f"{k} x{v}" for k, v in s["sample_agreement"].items())
        for n, s in result["passes"].items()
        if s["sample_agreement"]
    )
    if spread:
        out.append(f"sample agreement: {spread}")
    for q in result["questions"]:
        where = f"line {q['line']} {q['pass']} {subject_text(q['subject'])}"
        if q["answer"] is None:
            out.append(f"unanswered: {where}: {q['source']}{' - ' + q['error'] if q.get('error') else ''}")
        elif q["answer"] != q["label"]:
            out.append(f"disagrees: {where}: label {q['label']}, judge {q['answer']}")
        if len(set(q["by_position"])) > 1:
            out.append(f"flips: {where}: {' / '.join(q['by_position'])} by order")
    for s in result["skipped"]:
        out.append(f"skipped: line {s['line']} {s['pass']}: {s['reason']}")
    return out
