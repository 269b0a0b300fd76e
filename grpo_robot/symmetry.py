"""What makes a list of mirror axes (`policy.mirror`) one that picks a canonical frame: checked
without torch, by the config's validation before any work and by the policy's `Mirror` when it is
built (grpo_robot/policies/base.py).

An axis is a reflection of the world under which the task is unchanged. It maps an observation
`x` to `x'[i] = s[i] * x[p[i]] + o[i]`, a signed permutation and an offset: `obs` names the entries
it negates, `swap` the pairs of entries it exchanges (a left and a right finger, two arms), and
`center` the coordinate of the mirror plane for each negated entry (`x -> 2c - x`; 0 by
default, for a plane through the origin). Actions map alike through `action` and `swap_action`,
without offsets. Its `key`, one entry or entry i minus entry j, picks the frame: negative, the
policy sees the reflected observation."""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np

SHAPE = ("a non-empty list of {key: [i] or [i, j], obs: [...], action: [...]}, entries whole numbers >= 0, "
         "each axis optionally with swap: [[i, j], ...], swap_action: [[i, j], ...] and center: [one per obs entry]")
REQUIRED = ("key", "obs", "action")
OPTIONAL = ("swap", "swap_action", "center")


def reflection(axis: dict[str, Any], size: int, actions: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(permutation p [size] int, signs s [size], offsets o [size]) of a well-formed `axis` on the
    observation (or, with `actions`, the action) vector: `x'[i] = s[i] * x[p[i]] + o[i]`."""
    negated, pairs = (axis["action"], axis.get("swap_action", [])) if actions else (axis["obs"], axis.get("swap", []))
    perm, sign, offset = np.arange(size), np.ones(size), np.zeros(size)
    for i, j in pairs:
        perm[i], perm[j] = j, i
    sign[negated] = -1.0
    if not actions and "center" in axis:
        offset[axis["obs"]] = 2.0 * np.asarray(axis["center"], dtype=float)
    return perm, sign, offset


def key_center(axis: dict[str, Any], size: int) -> float:
    """The reading of `axis`'s key on its mirror plane (0 without centers): the key is taken
    relative to it, `key - key_center`, which the reflection negates."""
    offset = reflection(axis, size)[2]
    value = offset[axis["key"][0]] - (offset[axis["key"][1]] if len(axis["key"]) == 2 else 0.0)
    return float(value) / 2.0


def is_plain_flip(axis: dict[str, Any]) -> bool:
    """Whether `axis` only negates entries about planes through the origin (no swaps, no centers)."""
    return not axis.get("swap") and not axis.get("swap_action") and not any(axis.get("center", []))


def _compose(a: tuple, b: tuple) -> tuple:
    """The map `x -> a(b(x))` of two (perm, sign, offset) maps."""
    (pa, sa, oa), (pb, sb, ob) = a, b
    return pb[pa], sa * sb[pa], sa * ob[pa] + oa


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _entries(value: Any) -> bool:
    return isinstance(value, list) and all(type(i) is int and i >= 0 for i in value)


def _shape_problem(n: int, axis: Any, obs_dim: int | None, action_dim: int | None) -> tuple[str, Any, str] | None:
    """The first thing wrong with axis `n`'s own fields, each read alone."""
    if not isinstance(axis, dict) or not set(REQUIRED) <= set(axis) <= {*REQUIRED, *OPTIONAL}:
        return f"[{n}]", axis, f"must be {SHAPE}"
    for name in (*REQUIRED, "swap", "swap_action"):
        if name not in axis:
            continue
        value = axis[name]
        pairs = name.startswith("swap")
        flat = [i for pair in value for i in pair] if pairs and isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 for p in value) else value  # fmt: skip
        if (pairs and flat is value) or not _entries(flat):
            return f"[{n}].{name}", value, f"must be {SHAPE}"
        swapped = axis.get("swap_action" if name == "action" else "swap") if name in ("obs", "action") else None
        if len(set(flat)) != len(flat) or not (flat or swapped or (pairs and value == [])):
            what = "distinct entries, at least one" + (" where it swaps none" if name in ("obs", "action") else "")
            return f"[{n}].{name}", value, f"must name {what}"
        size = action_dim if name in ("action", "swap_action") else obs_dim
        if size is not None and flat and max(flat) >= size:
            return f"[{n}].{name}", value, f"must lie in [0, {size}) for this env"
    if len(axis["key"]) > 2:
        return f"[{n}].key", axis["key"], "must name one or two observation entries"
    if "center" in axis:
        center = axis["center"]
        numbers = isinstance(center, list) and all(_number(c) and math.isfinite(c) for c in center)
        if not (numbers and len(center) == len(axis["obs"])):
            return f"[{n}].center", center, f"must be a list of {len(axis['obs'])} finite numbers, one per obs entry"
    for negated, swap, name in ((axis["obs"], axis.get("swap", []), "swap"),
                                (axis["action"], axis.get("swap_action", []), "swap_action")):  # fmt: skip
        centers = dict(zip(axis["obs"], axis["center"], strict=True)) if name == "swap" and "center" in axis else {}
        for i, j in swap:  # a reflection is its own inverse: both entries of a pair negated, or neither
            if (i in negated) != (j in negated) or centers.get(i, 0.0) != centers.get(j, 0.0):
                why = "with the same center" if (i in negated) == (j in negated) else "that are both negated or neither"
                return f"[{n}].{name}", swap, f"must pair entries {why}, so that reflecting twice is the identity " \
                                             f"(entries {i}, {j})"
    return None


def axes_problem(axes: Any, obs_dim: int | None = None,
                 action_dim: int | None = None) -> tuple[str, Any, str] | None:  # fmt: skip
    """The first thing wrong with `axes`, as (where: `""` for the list, `"[n]"` for axis n,
    `"[n].key"` for its field; the value; what is allowed), or None. Each axis must be a
    reflection (its own inverse); its `key` must read negated under its own reflection, so that
    reflecting makes it positive, and as it is under every other axis's, so that another axis's
    reflection leaves its frame; and the axes must commute, so that the frame of several
    reflected axes does not depend on their order. With the sizes, every entry must lie inside
    them."""
    if not isinstance(axes, list) or not axes:
        return "", axes, f"must be {SHAPE}"
    for n, axis in enumerate(axes):
        problem = _shape_problem(n, axis, obs_dim, action_dim)
        if problem is not None:
            return problem
    size = obs_dim or 1 + max(max([*a["key"], *a["obs"], *(i for p in a.get("swap", []) for i in p)]) for a in axes)
    act = action_dim or 1 + max(max([*a["action"], *(i for p in a.get("swap_action", []) for i in p)], default=0)
                                for a in axes)  # fmt: skip
    maps = [reflection(axis, size) for axis in axes]
    for n, axis in enumerate(axes):  # every axis well formed: their keys against each other's entries
        key = np.zeros(size)
        key[axis["key"][0]] += 1.0
        if len(axis["key"]) == 2:
            key[axis["key"][1]] -= 1.0
        for other, rest in enumerate(axes):
            perm, sign, _ = maps[other]
            image = np.zeros(size)
            np.add.at(image, perm, key * sign)  # the key's coefficients on x after the reflection
            swapped = {i for pair in rest.get("swap", []) for i in pair}
            if other == n:
                if not np.array_equal(image, -key):  # its plane's reading is then its own: key_center
                    outside = [i for i in axis["key"] if i not in rest["obs"] and i not in swapped]
                    why = (f"must be among its own obs entries (entry {outside[0]})" if outside else
                           "must read negated under its own reflection: both its entries negated, or a swapped "
                           "pair that it does not negate")  # fmt: skip
                    return f"[{n}].key", axis["key"], why
            else:
                for i in axis["key"]:
                    if i in rest["obs"]:
                        return f"[{n}].key", axis["key"], f"must be among axis {other}'s obs entries, only its own " \
                                                          f"(entry {i})"
                    if i in swapped:
                        return f"[{n}].key", axis["key"], f"must not be among axis {other}'s swapped entries " \
                                                          f"(entry {i})"
    for a, b in combinations(range(len(axes)), 2):
        for actions, dim in ((False, size), (True, act)):
            ma, mb = reflection(axes[a], dim, actions), reflection(axes[b], dim, actions)
            if not all(np.array_equal(x, y) for x, y in zip(_compose(ma, mb), _compose(mb, ma), strict=True)):
                what = "action" if actions else "obs"
                return f"[{b}]", axes[b], f"must commute with axis {a} (reflect across both in either order, the " \
                                          f"same {what}): an entry one axis swaps, the other must negate both of " \
                                          "or neither"
    return None
