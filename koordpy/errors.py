"""The one root of koordpy's errors, and the exit status each kind of error means.

Belongs here: ``KoordpyError``, the class every error koordpy raises on purpose derives from,
``BadInput`` (input koordpy cannot use), and the exit statuses they carry. The command line
turns any of them into one line on stderr and its exit status, in one place
(``koordpy.cli.main``). Does not belong here: the errors themselves, which live beside the code
that raises them (``api.errors.ParseError``, ``sim.errors.InputError``,
``settings.SettingsError``, ``core.explain.AmbiguousGang``, ``cli.manifests.UsageError``...),
or printing. This module imports nothing from koordpy, so that every layer may derive from it.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_FAILURE = 1  # the command ran and could not do what was asked (explain: no such pod)
EXIT_INPUT = 2  # invalid arguments or input: nothing was done


def one_line(message: object) -> str:
    """``message`` with its line breaks and runs of blanks folded: a YAML or API error may span lines."""
    return " ".join(str(message).split())


class KoordpyError(Exception):
    """An error koordpy raises on purpose, with the exit status it means on the command line.

    ``exit_code`` plays the part of h11's ``error_status_hint``: the error knows what it means to
    the caller, and the caller (the CLI) maps every error the same way.
    """

    exit_code: ClassVar[int] = EXIT_FAILURE
    # False where the message is built from the caller's own words (a name, a path): printed as given.
    fold: ClassVar[bool] = True

    def report(self) -> str:
        """The line the command line prints after ``PROG: ``."""
        return f"error: {one_line(self) if self.fold else self}"


class BadInput(KoordpyError):
    """Input koordpy cannot use: a file, an object in it, an argument or a configuration key."""

    exit_code: ClassVar[int] = EXIT_INPUT
