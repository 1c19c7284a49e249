"""Named exceptions. The library raises them; only cli.py turns them into messages and exit codes."""


class KnomitError(Exception):
    """Base of every expected failure; its message is meant for the user."""

    exit_code = 2


class MissingResource(KnomitError):
    """A file the package ships (a prompt, the migrations) is missing or incomplete: a broken install."""


class ConfigError(KnomitError):
    """A configuration key is unknown or has a bad value."""


class NotACorpus(KnomitError):
    """The directory is not a git repository with a corpus in it."""


class CorpusLocked(KnomitError):
    """Another session holds the corpus lock."""

    exit_code = 3


class JudgeRefused(KnomitError):
    """The judge API refused every request for a reason retrying cannot fix (bad key, permission, model)."""

    def __init__(self, message: str, model: str | None = None) -> None:
        super().__init__(message)
        # a 404 that names the model asked: it may have retired since it was read
        self.model = model


class UnknownVerdict(KnomitError):
    """No stored verdict has that id."""


class NotRevertible(KnomitError):
    """The verdict applied nothing, or was already reverted."""


class CannotWrite(KnomitError):
    """An output file cannot be written where it was asked to go (no such directory, no permission)."""


class DecisionRefused(KnomitError):
    """A decision was abandoned whole: a file it writes cannot be written, or would not parse once written.

    Nothing of it is left in the tree; `path`, `line` and `reason` name the problem for the session report.
    """

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path, self.reason, self.line = path, reason, line
        super().__init__(f"{path}:{line}: {reason}" if line else f"{path}: {reason}")


class CorpusUnwritable(KnomitError):
    """The corpus (its .git or .knomit) cannot be written: a read-only file system, or a path in the way."""


class BadFact(Exception):
    """A fact file cannot be read; carries the path, line and reason for the report."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path, self.reason, self.line = path, reason, line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}")


class TemplateNote(BadFact):
    """A note with template placeholders (`{{date}}`): not a fact and not a problem, only counted as left out."""


class Unparsed(Exception):
    """A judge reply that does not follow the reply contract: never a verdict."""


class Unavailable(Exception):
    """The judge gave no reply in time or within the retry budget: never a verdict."""


class Refused(Exception):
    """The judge API refused one question's request for its content (HTTP 400, 413): never a verdict."""


class BadLabel(KnomitError):
    """A label given to `label` is not yes or no, or a line of a `label --file` file is malformed."""


class BadLabelledQuestion(KnomitError):
    """A line of calibrate's labels file is not a well-formed labelled question."""
