"""tjctl's exit codes, and every error it expects as one line (or a line per invalid field) instead of a traceback."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.text import Text

from trainingjob_sdk import (
    Invalid,
    JobFinished,
    NotConfigured,
    TrainingJobError,
    Unavailable,
    WaitTimeout,
)
from trainingjob_sdk.errors import one_line
from trainingjob_sdk.kube import NO_CLUSTER
from trainingjob_sdk.rest import BAD_CA, BAD_SERVER, BAD_TOKEN

OK = 0
FAILED = 1  # the job failed (or finished without reaching what wait waited for), or the server refused the request
USAGE = 2  # bad flags or input: an invalid manifest, an unreadable (or unwritable) file, --kill that matches nothing
TIMEOUT = 3  # `wait` (or `--wait`) ran out of time
UNREACHABLE = 4  # no cluster configured, or it (or the REST API) cannot be reached or cannot serve now (429, 5xx)
INTERRUPTED = 130  # Ctrl-C

EPILOG = f"""exit codes:
  {OK}    done (wait: the job reached what was waited for)
  {FAILED}    the job failed (wait: or finished without reaching --for), or the server refused the request
  {USAGE}    bad usage or input: flags, an invalid manifest, a file it cannot read or write, a missing dependency
  {TIMEOUT}    timed out (wait --timeout)
  {UNREACHABLE}    no cluster configured, or it cannot be reached (or cannot serve now: try again later)
  {INTERRUPTED}  interrupted (Ctrl-C)

The cluster: --server URL --token TOKEN for the REST API ($TJCTL_SERVER, $TJCTL_TOKEN), otherwise the kubeconfig
(--kubeconfig, $KUBECONFIG, ~/.kube/config; --context). Flags may come before or after the command."""

NOT_CONFIGURED_HINT = "tjctl finds the cluster by --kubeconfig, $KUBECONFIG or ~/.kube/config, or --server and --token"


class UsageError(Exception):
    """Bad flags or input that tjctl itself found; the message names the flag or the field."""


def file_problem(error: OSError, path: Path | str | None = None) -> UsageError:
    """An OSError about a file the user named, as one line: '/nowhere/x.json: No such file or directory'."""
    named = path if path is not None else error.filename
    return UsageError(f"{named}: {error.strerror or error}" if named is not None else str(error))


@contextmanager
def user_file(path: Path | str) -> Iterator[None]:
    """Reading or writing the file at `path` that the user named: an OSError is a UsageError naming it."""
    try:
        yield
    except OSError as error:
        raise file_problem(error, path) from None


def exit_code(error: Exception) -> int:
    if isinstance(error, UsageError | Invalid):
        return USAGE
    if isinstance(error, NotConfigured) and error.reason in (BAD_SERVER, BAD_CA, BAD_TOKEN):
        return USAGE  # --server or --cacert as typed
    if isinstance(error, WaitTimeout):
        return TIMEOUT
    if isinstance(error, NotConfigured | Unavailable):
        return UNREACHABLE
    return FAILED


def lines(error: Exception) -> list[str]:
    """What to print: 'error: ...' or, for what a server answered, 'error from the server (Reason): ...'; then one
    line per invalid field the first line does not already say (as str(Invalid) leaves them out)."""
    if not isinstance(error, TrainingJobError):
        return ["error: " + one_line(str(error))]
    if isinstance(error, JobFinished | WaitTimeout):
        return [one_line(str(error))]
    message = one_line(error.message)  # whatever the server or a YAML parser wrote
    if isinstance(error, NotConfigured) and error.reason == NO_CLUSTER:
        message = f"{message} ({NOT_CONFIGURED_HINT})"
    first = f"error from the server ({error.reason}): {message}" if error.status is not None else f"error: {message}"
    fields = error.unsaid() if isinstance(error, Invalid) else []
    return [first] + [f"  {one_line(str(field))}" for field in fields]


def report(error: Exception, console: Console) -> int:
    """Print the error on `console` (stderr) and return its exit code."""
    for number, line in enumerate(lines(error)):
        console.print(Text(line, style="red" if number == 0 else ""), soft_wrap=True)
    return exit_code(error)
