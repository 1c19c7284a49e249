"""The worth rule (worth.py): the opening reads by a prior over score, and a read is priced as itself, so what
the rule held back stays held on an unchanged corpus.

Real store, real git, the real embedder, the real SDK against the loopback Messages server.
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from helpers import fact_text, make_repo, motif_repo, write_config
from messages_server import tool

from knomit_judge.cli import cli

NO = {"same": False, "mechanism": ""}
QUIET = "[judge]\nconcurrency = 1\nbackoff_s = 0.0\nswap_sample = 0.0\n[describe]\nenabled = false\n"

# A small personal vault: 40 notes on unrelated subjects, tagged from 17 everyday tags (136 tag pairs).
NOTES = [
    ("Asyncio gather runs coroutines concurrently", ["python", "asyncio"]),
    ("Anchoring bias skews estimates toward the first number heard", ["psychology", "cognition"]),
    ("Sourdough needs a mature starter to rise", ["baking", "cooking"]),
    ("Index funds beat most active managers after fees", ["finance", "investing"]),
    ("Caffeine late in the day delays sleep onset", ["health", "sleep"]),
    ("Write the first draft fast and edit later", ["writing", "productivity"]),
    ("The printing press spread literacy across Europe", ["history"]),
    ("Pack a carry-on only for trips under a week", ["travel"]),
    ("Practising scales slowly builds finger accuracy", ["music"]),
    ("Tomatoes need six hours of sun a day", ["gardening"]),
    ("A B-tree index speeds up range queries", ["databases"]),
    ("List comprehensions are faster than append loops", ["python"]),
    ("Confirmation bias makes us seek agreeing evidence", ["psychology", "cognition"]),
    ("Searing meat does not seal in juices", ["cooking"]),
    ("Compound interest rewards starting early", ["finance", "investing"]),
    ("A dark cool room improves sleep quality", ["sleep", "health"]),
    ("Time blocking protects deep work from meetings", ["productivity"]),
    ("The Roman aqueducts carried water by gravity alone", ["history"]),
    ("Night trains save a hotel night on long routes", ["travel"]),
    ("Metronome practice fixes rushing tempo", ["music"]),
    ("Mulch keeps soil moist through dry spells", ["gardening"]),
    ("Write-ahead logging makes database commits durable", ["databases"]),
    ("Type hints let mypy catch bugs before runtime", ["python"]),
    ("The spacing effect makes spaced review stick", ["cognition"]),
    ("Resting dough relaxes the gluten", ["baking"]),
    ("An emergency fund covers three to six months of costs", ["finance"]),
    ("Walking after meals lowers blood sugar spikes", ["health"]),
    ("Short sentences read faster on screens", ["writing"]),
    ("The Silk Road moved ideas as well as goods", ["history", "travel"]),
    ("Ear training starts with intervals", ["music"]),
    ("Composting turns kitchen scraps into fertiliser", ["gardening", "cooking"]),
    ("Connection pools cap the load on a database", ["databases"]),
    ("Generators yield values lazily one at a time", ["python"]),
    ("Loss aversion makes losses loom larger than gains", ["psychology"]),
    ("Brining keeps roast chicken moist", ["cooking"]),
    ("Rebalancing sells winners to buy laggards", ["investing"]),
    ("Naps longer than thirty minutes cause grogginess", ["sleep"]),
    ("A daily word count goal beats waiting for inspiration", ["writing", "productivity"]),
    ("Vacuum sealing slows freezer burn", ["cooking"]),
    ("Sharding splits a table across servers", ["databases"]),
]


def vault(tmp_path):
    facts = {f"facts/n{i:02d}.md": fact_text(title, tags, body=f"{title}.") for i, (title, tags) in enumerate(NOTES)}
    return make_repo(tmp_path / "vault", facts)


def dry_run(repo) -> dict:
    result = CliRunner().invoke(cli, ["-q", "review", str(repo.root), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_first_dry_run_of_a_small_vault_offers_no_pair_the_prior_rules_out(tmp_path, judge_env, monkeypatch):
    from knomit_judge.passes.registry import all_passes
    from knomit_judge.worth import prior

    passes = all_passes()
    # the defaults: claude-haiku-5-5 reads first
    monkeypatch.delenv("KNOMIT_JUDGE_FIRST_READER")
    repo = vault(tmp_path)
    every = dry_run_unthrottled(repo)
    # the vault holds hopeless questions: prune pairs of notes on unrelated subjects (130 of its 132), far below
    # prune's floor, and tag pairs below alias's (asyncio / finance, 0.12)
    assert min(item["score"] for item in every["prune"]) < 0.2
    hopeless = {n: [i for i in items if prior(passes[n].prior, i["score"]) == 0] for n, items in every.items()}
    assert len(hopeless["prune"]) > 0.9 * len(every["prune"]) and hopeless["alias"] and hopeless["discovery"]

    # the defaults: the opening balance, the worth rule, the first reader
    out = dry_run(repo)
    plan = out["plan"]
    # it still reads where the prior allows
    assert plan["prune"] and plan["alias"]
    for name in ("alias", "prune", "discovery"):
        floor = passes[name].prior[0]
        assert all(item["score"] > floor for item in plan.get(name, [])), (name, floor)
        assert not {json.dumps(i["subject"]) for i in plan.get(name, [])} & {
            json.dumps(i["subject"]) for i in hopeless.get(name, [])
        }
    assert out["passes"]["prune"]["waiting"] >= len(hopeless["prune"])


def dry_run_unthrottled(repo) -> dict:
    """Every candidate with its score: the dry run of budget.enabled = false (no throttle, no worth rule)."""
    write_config(repo, "[budget]\nenabled = false\n")
    plan = dry_run(repo)["plan"]
    write_config(repo, "")
    return plan


def test_what_the_worth_rule_held_back_stays_held_on_an_unchanged_corpus(tmp_path, judge_env):
    # reads far smaller than the typical question the balance counts (1,500 tokens in, 100 out): a price taken
    # from that figure in the first session and from the calls measured in the next held 8 questions back, then
    # asked them, on a corpus nothing had changed
    repo = motif_repo(tmp_path, "")
    write_config(repo, QUIET + "[budget]\nopening_usd = 1.0\nusd_per_resolution = 0.08\n")
    judge_env.responder = lambda req, n: tool(NO, input_tokens=300, output_tokens=50)
    first = alias(repo.root)
    held = first["waiting"]
    assert first["judged"] >= 20 and held > 0
    assert any(f"{held} question(s) not worth their price" in n for n in first["notes"])
    # nothing changed: nothing becomes worth asking
    for _ in range(2):
        again = alias(repo.root)
        assert (again["judge_calls"], again["judged"], again["waiting"]) == (0, 0, held)
        assert any(f"{held} question(s) not worth their price" in n for n in again["notes"])


def alias(root) -> dict:
    result = CliRunner().invoke(cli, ["-q", "review", str(root), "--pass", "alias", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["passes"]["alias"]
