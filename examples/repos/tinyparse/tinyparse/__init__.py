"""tinyparse: small expression and configuration parsers."""

from .errors import ConfigError, EvaluationError, ParseError
from .tokenizer import Token, tokenize
from .expr import BinOp, Call, Num, UnaryOp, Var, evaluate, parse
from .config import Config, parse_config

__all__ = [
    "BinOp",
    "Call",
    "Config",
    "ConfigError",
    "EvaluationError",
    "Num",
    "ParseError",
    "Token",
    "UnaryOp",
    "Var",
    "evaluate",
    "parse",
    "parse_config",
    "tokenize",
]

__version__ = "0.3.1"
