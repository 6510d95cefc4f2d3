"""hotloop's errors, as the C++ core raises them (the same message and hint as the CLI prints).

    Error              anything hotloop refuses or fails at (RuntimeError)
      UsageError       a bad argument or option (also a ValueError)
        ConfigError    a bad configuration value
      DataError        unreadable or invalid data: the message names the file
      EnvError         the machine cannot do it (no CUDA, a missing library)
      OutOfMemoryError the device ran out of memory (also a MemoryError)

`str(e)` is the message; `e.hint` says how to fix it ("" when there is nothing to add).
"""


class Error(RuntimeError):
    def __init__(self, message, hint=""):
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(Error, ValueError):
    pass


class ConfigError(UsageError):
    pass


class DataError(Error):
    pass


class EnvError(Error):
    pass


class OutOfMemoryError(Error, MemoryError):
    pass
