"""Edit distance and fuzzy matching."""


def levenshtein(a, b, max_distance=None):
    """Return the Levenshtein edit distance between ``a`` and ``b``.

    When ``max_distance`` is given, the computation stops early and returns
    ``max_distance + 1`` once the distance is known to exceed it.
    """
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    if max_distance is not None and len(a) - len(b) > max_distance:
        return max_distance + 1
    if not b:
        return len(a)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            cost = 0 if ca == cb else 1
            current.append(min(
                previous[j] + 1,         # deletion
                current[j - 1] + 1,      # insertion
                previous[j - 1] + cost,  # substitution
            ))
        if max_distance is not None and min(current) > max_distance:
            return max_distance + 1
        previous = current
    return previous[-1]


def similarity(a, b):
    """Similarity in [0, 1]: 1 - distance / length of the longer string."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    return 1.0 - levenshtein(a, b) / longest


def closest(word, candidates, cutoff=0.6):
    """Return the candidate most similar to ``word``, or None.

    Candidates scoring below ``cutoff`` are ignored; ties go to the
    candidate that appears first.
    """
    best = None
    best_score = cutoff
    for candidate in candidates:
        score = similarity(word, candidate)
        if score > best_score or (best is None and score == best_score):
            best, best_score = candidate, score
    return best
