"""URL slug generation."""

import unicodedata


def slugify(text, separator="-", max_length=None):
    """Convert ``text`` to a lower-case ASCII slug.

    Accents are stripped, runs of non-alphanumeric characters become a
    single ``separator`` and leading/trailing separators are removed.  When
    ``max_length`` is given the slug is cut at a word boundary if possible.
    """
    normalized = unicodedata.normalize("NFKD", text)
    ascii_text = normalized.encode("ascii", "ignore").decode("ascii")
    words = []
    current = []
    for ch in ascii_text.lower():
        if ch.isalnum():
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    slug = separator.join(words)
    if max_length is not None and len(slug) > max_length:
        cut = slug[:max_length]
        boundary = cut.rfind(separator)
        # Only back off to a word boundary if it keeps at least one word.
        if boundary > 0 and slug[max_length:max_length + len(separator)] != separator:
            cut = cut[:boundary]
        slug = cut.rstrip(separator)
    return slug
