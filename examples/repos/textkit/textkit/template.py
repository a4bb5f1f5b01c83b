"""Minimal ``{{ name }}`` template rendering with filters and defaults.

Syntax: ``{{ user.name | upper }}``, ``{{ missing ? "fallback" }}`` and
``{{{{`` for a literal ``{{``.  Dotted names look up dict keys first and
then attributes.
"""


class TemplateError(Exception):
    pass


FILTERS = {
    "upper": str.upper,
    "lower": str.lower,
    "title": str.title,
    "strip": str.strip,
    "len": lambda s: str(len(s)),
}

_MISSING = object()


def _lookup(context, dotted):
    value = context
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif not isinstance(value, dict) and hasattr(value, part):
            value = getattr(value, part)
        else:
            return _MISSING
    return value


def _evaluate(expr, context):
    default = _MISSING
    if "?" in expr:
        expr, raw_default = expr.split("?", 1)
        raw_default = raw_default.strip()
        if len(raw_default) < 2 or raw_default[0] != '"' or raw_default[-1] != '"':
            raise TemplateError("default must be a double-quoted string")
        default = raw_default[1:-1]
    parts = [p.strip() for p in expr.split("|")]
    name, filters = parts[0], parts[1:]
    if not name:
        raise TemplateError("empty placeholder")
    value = _lookup(context, name)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise TemplateError("undefined name %r" % name)
        value = default
    text = str(value)
    for filter_name in filters:
        if filter_name not in FILTERS:
            raise TemplateError("unknown filter %r" % filter_name)
        text = FILTERS[filter_name](text)
    return text


def render(template, context):
    out = []
    i = 0
    while True:
        start = template.find("{{", i)
        if start < 0:
            out.append(template[i:])
            break
        out.append(template[i:start])
        if template.startswith("{{{{", start):
            out.append("{{")
            i = start + 4
            continue
        end = template.find("}}", start + 2)
        if end < 0:
            raise TemplateError("unclosed placeholder at offset %d" % start)
        out.append(_evaluate(template[start + 2:end], context))
        i = end + 2
    return "".join(out)
