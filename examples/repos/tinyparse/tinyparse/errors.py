"""Exception types shared by the tinyparse modules."""


class ParseError(Exception):
    """Raised when input text cannot be parsed.

    ``position`` is the zero-based character offset (for expressions) or
    the one-based line number (for config files) where the problem was
    detected, or ``None`` when unknown.
    """

    def __init__(self, message, position=None):
        self.message = message
        self.position = position
        if position is None:
            super().__init__(message)
        else:
            super().__init__("%s (at %d)" % (message, position))


class EvaluationError(Exception):
    """Raised when a syntactically valid expression cannot be evaluated."""


class ConfigError(Exception):
    """Raised for lookups or conversions that fail on a parsed config."""
