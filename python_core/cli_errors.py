"""One exit-code table and one way to end a command on a named error, for every console script
and for the ``dsh`` runs the sidecar sets an exit code of.

The table (``dsh-sidecar`` and every command under it, ``dsh-tool-cassette``, ``dsh-subagent-cassette``,
and ``dsh`` with the ``sidecar`` row enabled; the README's "CLI reference and exit codes" says the same):

====  =====================================================================================
code  meaning
====  =====================================================================================
0     ok: valid, equivalent, done
1     a named error: invalid input, an unreadable file, an I/O failure, a broken host
2     a usage error (click's own), or ``diff`` found a difference or the files are not
      comparable (a drift gate, like ``diff(1)``)
3     ``model-cassette diff``: only metadata differs (``EXIT_METADATA``); a ``dsh`` run: its
      ``/mock`` turn was refused before any tool ran (``EXIT_MOCK_REFUSED``). Two commands, one
      number: each is the command's "partly" verdict, never an error of the tool itself
124   ``dsh-sidecar run`` passed ``--timeout`` and was killed (as ``timeout(1)``)
====  =====================================================================================

``dsh-sidecar run`` otherwise exits with the DSH process's own code. A named error is one
``CODE: message`` line on stderr, never a stack.
"""

from __future__ import annotations

from typing import IO, Any

import click

from dsh_sidecar.python_core.errors import SidecarError

__all__ = [
    "EXIT_DIFFERENT",
    "EXIT_FAILED",
    "EXIT_METADATA",
    "EXIT_MOCK_REFUSED",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "NamedFailure",
    "NotComparableFailure",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DIFFERENT = 2
EXIT_METADATA = 3
"""``model-cassette diff``: only metadata (usage, cache counters, failure details, timing) differs."""
EXIT_MOCK_REFUSED = 3
"""A ``dsh`` run whose ``/mock`` turn was refused before any tool ran (the highest code applies)."""
EXIT_TIMEOUT = 124


class NamedFailure(click.ClickException):
    """End the command on a named error: its one ``CODE: message`` line on stderr, exit 1."""

    exit_code = EXIT_FAILED

    def __init__(self, error: SidecarError, *, context: str = "") -> None:
        # ``context`` says which program or operand failed ("dsh-sidecar: ", "A: ").
        super().__init__(f"{context}{error}")
        self.error = error

    def show(self, file: IO[Any] | None = None) -> None:
        """Print the line alone (click's default adds ``Error:``)."""
        click.echo(self.format_message(), file=file, err=file is None)


class NotComparableFailure(NamedFailure):
    """``diff`` cannot compare the files: a verdict like a difference, exit 2."""

    exit_code = EXIT_DIFFERENT
