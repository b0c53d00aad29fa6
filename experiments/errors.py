"""The one error type a user sees for bad input: one line naming what is wrong."""


class SpecError(ValueError):
    """A spec (or CLI argument) is invalid. ``str()`` is one line: ``field: problem``."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem
