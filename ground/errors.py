"""Errors the CLI reports as one clear line and a non-zero exit (missing input, bad config, no token)."""


class UserError(Exception):
    """A problem the user can fix; the CLI prints `hopsmith: error: <message>` and exits with status 2."""


class StageIncomplete(UserError):
    """A stage left work unfinished after transient failures (an LLM endpoint or a wiki API timed out or was
    down): it writes no manifest and exits non-zero; a rerun retries what is unfinished."""


class DamagedOutput(UserError):
    """A finished stage's file does not match its manifest (missing, truncated, altered or swapped): the stage
    counts as unfinished, and its next run rebuilds it."""
