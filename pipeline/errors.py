"""Errors the CLI reports as one clear line and a non-zero exit (missing input, bad config, no token)."""


class UserError(Exception):
    """A problem the user can fix; the CLI prints `hopsmith: error: <message>` and exits with status 2."""
