"""Item analysis of each exercise, as quiz systems report it for a question.

- difficulty: the share of the item's points the class earned (mean score / max; 1.0 = everyone
  got full marks);
- discrimination, two ways: the *corrected* point-biserial, Pearson's r between the item's score
  and the rest of each learner's total (the total without this item, so that the item does not
  correlate with itself); and the upper/lower-27 % index (Kelley): the learners ranked by total,
  the top and bottom ``round(0.27 n)`` (at least 1), and the difference of the two groups' mean
  item scores over the item's max (ties at the cut are broken by learner name, so that the index
  is reproducible);
- an item whose point-biserial is below ``POOR`` (0.2) is marked for review, "negative" when below 0:
  strong learners fail it as often as weak ones, or more (a wrong key, an ambiguous task). With no
  spread in the item or in the rest (everyone scored the same) r is undefined and nothing is marked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

POOR = 0.2
SHARE = 0.27


def pearson(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's r; None when either side has no spread (or fewer than 2 values)."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sxy / math.sqrt(sxx * syy)


def upper_lower_index(scores: dict[str, float], totals: dict[str, float], max_score: float,
                      share: float = SHARE) -> float | None:
    """(mean item score of the top ``share`` by total - that of the bottom ``share``) / max_score."""
    learners = sorted(scores, key=lambda learner: (-totals[learner], learner))
    n = len(learners)
    if n < 2 or max_score <= 0:
        return None
    size = max(1, round(share * n))
    upper, lower = learners[:size], learners[-size:]
    mean = lambda group: sum(scores[learner] for learner in group) / len(group)   # noqa: E731
    return (mean(upper) - mean(lower)) / max_score


@dataclass
class ItemStatistics:
    difficulty: float | None           # share of points earned
    point_biserial: float | None       # corrected: against the rest of the total
    upper_lower: float | None          # the 27 % index
    review: str                        # "", "poor" or "negative"


def item_statistics(scores: dict[str, float], totals: dict[str, float], max_score: float) -> ItemStatistics:
    """``scores``: learner -> this item's points; ``totals``: learner -> their whole total (this item included)."""
    learners = sorted(scores)
    if not learners or max_score <= 0:
        return ItemStatistics(None, None, None, "")
    item = [scores[learner] for learner in learners]
    rest = [totals[learner] - scores[learner] for learner in learners]
    difficulty = sum(item) / len(item) / max_score
    r = pearson(item, rest)
    review = "" if r is None else "negative" if r < 0 else "poor" if r < POOR else ""
    return ItemStatistics(difficulty, r, upper_lower_index(scores, totals, max_score), review)
