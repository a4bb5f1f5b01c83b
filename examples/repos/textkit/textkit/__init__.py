"""textkit: small, dependency-free text utilities."""

from .case import split_words, to_camel, to_kebab, to_pascal, to_snake
from .distance import closest, levenshtein, similarity
from .roman import from_roman, to_roman
from .slug import slugify
from .template import TemplateError, render
from .wrap import wrap

__all__ = [
    "TemplateError",
    "closest",
    "from_roman",
    "levenshtein",
    "render",
    "similarity",
    "slugify",
    "split_words",
    "to_camel",
    "to_kebab",
    "to_pascal",
    "to_roman",
    "to_snake",
    "wrap",
]

__version__ = "0.5.0"
