"""The demo corpus: one of each decision on the first review, caught-up at 0 calls on the second."""

import pytest
from helpers import DEMO, demo_repo, git

from knomit_judge.corpus import load_corpus
from knomit_judge.session.review import ReviewOptions, review

# slow: the whole demo: two reviews of the demo corpus
pytestmark = pytest.mark.slow


def test_demo_shows_each_decision_then_is_caught_up(tmp_path):
    repo = demo_repo(tmp_path / "demo")
    judge = f"scripted:{DEMO / 'judge-replies.jsonl'}"

    first = review(repo.root, ReviewOptions(judge=judge))
    passes = git(repo.root, "log", "--format=%(trailers:key=Knomit-Pass,valueonly)").split()
    assert sorted(passes) == ["alias", "alias", "alias", "discovery", "exact", "prune", "prune"]
    subjects = repo.log()
    assert any(s.startswith("prune: merge ") for s in subjects)
    assert any(s.startswith("prune: retract ") for s in subjects)
    # the look-alike pair is still two spellings
    carriers = load_corpus(repo.root).carriers
    assert carriers.get("feedback-latch") and carriers.get("feedback-delay-oscillation")
    assert not carriers.get("self-locking-penalty")
    assert all(r.state == "worked" for r in first.passes.values())
    assert repo.status() == ""

    second = review(repo.root, ReviewOptions(judge=judge))
    for name in ("alias", "prune", "discovery"):
        assert second.passes[name].state == "caught-up", second.text_lines()
        assert second.passes[name].judge_calls == 0
    assert second.passes["exact"].state == "nothing-qualified"
