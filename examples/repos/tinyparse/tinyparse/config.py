"""Parser for INI-like configuration text.

Supported syntax::

    # full-line comments start with '#' or ';'
    top = value            ; keys before any header go to the "DEFAULT" section
    [section]
    key = value
    other: value           ; ':' works as a separator too
    long = first line
        continuation line  ; indented lines extend the previous value
    path = ${section:key}/sub   ; interpolation, ${key} looks in the same section

Section and key names are case-insensitive (stored lower-case).
Keys missing from a section fall back to the DEFAULT section.
"""

from .errors import ConfigError, ParseError

DEFAULT_SECTION = "DEFAULT"
_TRUE_WORDS = ("1", "yes", "true", "on")
_FALSE_WORDS = ("0", "no", "false", "off")
_MAX_INTERPOLATION_DEPTH = 10


def _strip_inline_comment(value):
    """Remove a trailing ' #' or ' ;' comment, honouring double quotes."""
    in_quotes = False
    for i, ch in enumerate(value):
        if ch == '"':
            in_quotes = not in_quotes
        elif ch in "#;" and not in_quotes and i > 0 and value[i - 1].isspace():
            return value[:i].rstrip()
    return value


def _unquote(value):
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


class Config:
    """Parsed configuration: an ordered mapping of sections to key/values."""

    def __init__(self):
        self._sections = {DEFAULT_SECTION: {}}

    # -- structure -----------------------------------------------------
    def sections(self):
        """Return section names in definition order, excluding DEFAULT."""
        return [name for name in self._sections if name != DEFAULT_SECTION]

    def has_section(self, section):
        return section == DEFAULT_SECTION or section.lower() in self._sections

    def keys(self, section):
        self._require_section(section)
        merged = dict(self._sections[DEFAULT_SECTION])
        merged.update(self._sections[section.lower()])
        return list(merged)

    def set(self, section, key, value):
        name = section if section == DEFAULT_SECTION else section.lower()
        self._sections.setdefault(name, {})[key.lower()] = str(value)

    def _require_section(self, section):
        if section != DEFAULT_SECTION and section.lower() not in self._sections:
            raise ConfigError("no section %r" % section)

    # -- lookups -------------------------------------------------------
    def get_raw(self, section, key):
        self._require_section(section)
        key = key.lower()
        name = section if section == DEFAULT_SECTION else section.lower()
        values = self._sections[name]
        if key in values:
            return values[key]
        defaults = self._sections[DEFAULT_SECTION]
        if key in defaults:
            return defaults[key]
        raise ConfigError("no key %r in section %r" % (key, section))

    def get(self, section, key, fallback=None, *, raw=False):
        try:
            value = self.get_raw(section, key)
        except ConfigError:
            if fallback is not None:
                return fallback
            raise
        if raw:
            return value
        return self._interpolate(section, value, 0)

    def get_int(self, section, key, fallback=None):
        value = self.get(section, key, fallback)
        if isinstance(value, int):
            return value
        try:
            return int(value, 0)
        except ValueError:
            raise ConfigError("%s.%s: %r is not an integer" % (section, key, value))

    def get_float(self, section, key, fallback=None):
        value = self.get(section, key, fallback)
        if isinstance(value, float):
            return value
        try:
            return float(value)
        except ValueError:
            raise ConfigError("%s.%s: %r is not a number" % (section, key, value))

    def get_bool(self, section, key, fallback=None):
        value = self.get(section, key, fallback)
        if isinstance(value, bool):
            return value
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
        raise ConfigError("%s.%s: %r is not a boolean" % (section, key, value))

    def get_list(self, section, key, sep=","):
        value = self.get(section, key)
        return [item.strip() for item in value.split(sep) if item.strip()]

    # -- interpolation ------------------------------------------------
    def _interpolate(self, section, value, depth):
        if depth > _MAX_INTERPOLATION_DEPTH:
            raise ConfigError("interpolation too deep in section %r" % section)
        out = []
        i = 0
        while i < len(value):
            if value.startswith("$$", i):
                out.append("$")
                i += 2
                continue
            if value.startswith("${", i):
                end = value.find("}", i + 2)
                if end < 0:
                    raise ConfigError("unterminated reference in %r" % value)
                ref = value[i + 2:end]
                if ":" in ref:
                    ref_section, ref_key = ref.split(":", 1)
                else:
                    ref_section, ref_key = section, ref
                raw = self.get_raw(ref_section, ref_key)
                out.append(self._interpolate(ref_section, raw, depth + 1))
                i = end + 1
                continue
            out.append(value[i])
            i += 1
        return "".join(out)

    def to_dict(self):
        """Return a plain ``{section: {key: value}}`` dict with values interpolated."""
        result = {}
        for section in self.sections():
            result[section] = {key: self.get(section, key) for key in self.keys(section)}
        return result


def parse_config(text, *, allow_duplicates=False):
    """Parse INI-like ``text`` and return a :class:`Config`."""
    config = Config()
    section = DEFAULT_SECTION
    last_key = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if line[0].isspace() and last_key is not None:
            # Continuation of the previous value.
            current = config._sections[section][last_key]
            addition = _strip_inline_comment(stripped)
            config._sections[section][last_key] = (current + "\n" + addition).strip()
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]"):
                raise ParseError("unterminated section header", lineno)
            name = stripped[1:-1].strip()
            if not name:
                raise ParseError("empty section name", lineno)
            section = name if name == DEFAULT_SECTION else name.lower()
            if section in config._sections and section != DEFAULT_SECTION and not allow_duplicates:
                raise ParseError("duplicate section %r" % name, lineno)
            config._sections.setdefault(section, {})
            last_key = None
            continue
        eq = stripped.find("=")
        colon = stripped.find(":")
        candidates = [p for p in (eq, colon) if p >= 0]
        if not candidates:
            raise ParseError("expected 'key = value'", lineno)
        sep = min(candidates)
        key = stripped[:sep].strip().lower()
        if not key:
            raise ParseError("empty key", lineno)
        value = _unquote(_strip_inline_comment(stripped[sep + 1:].strip()))
        values = config._sections[section]
        if key in values and not allow_duplicates:
            raise ParseError("duplicate key %r" % key, lineno)
        values[key] = value
        last_key = key
    return config
