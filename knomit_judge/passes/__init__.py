"""The passes: exact duplicates (mechanical), then the alias, prune and discovery judges.

Every judged pass goes the same way (session.rounds.run_round): candidates, ranked best
first -> questions not yet answered -> judge -> verdict -> change -> commit.
A pass only says what its candidates are, how to read a reply, and what a yes changes.

This face holds the shared types (base.py); the registry of passes is registry.py, so that
importing a Candidate never imports every pass.
"""

from .base import (
    JUDGED_PASSES,
    Candidate,
    CandidateSource,
    Change,
    Inputs,
    Pass,
    Restorer,
    Session,
    one_sentence,
    reply_object,
    subject_names,
)

__all__ = [
    "JUDGED_PASSES",
    "Candidate",
    "CandidateSource",
    "Change",
    "Inputs",
    "Pass",
    "Restorer",
    "Session",
    "one_sentence",
    "reply_object",
    "subject_names",
]
