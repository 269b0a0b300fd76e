"""Success-rate statistics."""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% for the default z).

    Unlike the normal approximation it stays inside [0, 1] and is sensible at 0 or n successes,
    where its bound on that side is exactly 0 or 1 (the formula's own, rounding aside).
    """
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


# Student's t distribution's 0.975 quantile for 1-30 degrees of freedom (standard tables)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    """Student's t 0.975 quantile (a two-sided 95% interval) for `df` >= 1 degrees of freedom: the
    table to 30, then the normal quantile's expansion in 1/df (within 1e-4 there)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)


def mean_rate_interval(rates, successes: int, episodes: int) -> tuple[float, float]:
    """A 95% interval for the mean success rate of k >= 2 policies (training seeds, checkpoints),
    each measured on as many episodes: Student's t over the k rates (a percentile bootstrap over
    2-5 rates covers 50-85%, not 95%), in [0, 1], and at least as wide as the Wilson interval of all
    `successes` in the pooled `episodes` (the measurement's own noise, which k equal rates would
    otherwise hide)."""
    import numpy as np

    rates = np.asarray(rates, dtype=np.float64)
    k = len(rates)
    if k < 2:
        raise ValueError(f"needs at least 2 rates, got {k}")
    half = t975(k - 1) * rates.std(ddof=1) / math.sqrt(k)
    low, high = wilson_interval(successes, episodes)
    return max(0.0, min(low, rates.mean() - half)), min(1.0, max(high, rates.mean() + half))
