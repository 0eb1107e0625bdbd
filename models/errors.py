"""The one error the command line turns into a one-line message and exit code 2."""


class UsageError(ValueError):
    """Bad input from the user: a missing file, an unknown task, numbers that make no sense.

    ``minigrad`` prints its message on one line and exits with code 2, without a traceback.
    """


class TrainingDiverged(UsageError):
    """The loss or a gradient stopped being finite: training stops before the step is taken,
    and the checkpoint on disk stays the last good one."""
