"""knomit-judge: keeps a git-backed knowledge corpus tidy with an LLM judge and git as the audit trail."""

from .config import Config, load_config
from .corpus import Corpus, Fact, load_corpus
from .errors import KnomitError
from .inbox import inbox
from .labels import label
from .rebuild import check as check_rebuild
from .rebuild import rebuild
from .revert import revert
from .session.context import ReviewOptions, SessionResult
from .session.review import review

__all__ = [
    "Config",
    "Corpus",
    "Fact",
    "KnomitError",
    "ReviewOptions",
    "SessionResult",
    "check_rebuild",
    "inbox",
    "label",
    "load_config",
    "load_corpus",
    "rebuild",
    "review",
    "revert",
]
