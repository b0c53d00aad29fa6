"""The one error type a user sees for bad input: one line naming what is wrong."""


class SpecError(ValueError):
    """A spec (or CLI argument) is invalid. ``str()`` is one line: ``field: problem``."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class PluginError(RuntimeError):
    """A researcher's own function (``module:function`` in a spec) raised or answered
    wrong at run time; ``str()`` is one line naming it."""


class TeardownError(RuntimeError):
    """Some tear-down steps failed; all steps ran. One line naming each failure."""


def one_line(err: BaseException) -> str:
    """An exception as one line, ``Type: first line``; a failed tear-down is shown after
    the fault that started it, which is the one to read first."""
    text = str(err).splitlines()[0] if str(err) else ""
    line = f"{type(err).__name__}: {text}" if text else type(err).__name__
    if isinstance(err, TeardownError) and err.__context__ is not None:
        line = f"{one_line(err.__context__)}; then {line}"
    return line
