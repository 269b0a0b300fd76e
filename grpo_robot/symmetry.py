"""What makes a list of mirror axes (`policy.mirror`) one that picks a canonical frame: checked
without torch, by the config's validation before any work and by the policy's `Mirror` when it is
built (grpo_robot/policies/base.py)."""

from __future__ import annotations

from typing import Any

SHAPE = "a non-empty list of {key: [i] or [i, j], obs: [...], action: [...]}, entries whole numbers >= 0"


def axes_problem(axes: Any, obs_dim: int | None = None,
                 action_dim: int | None = None) -> tuple[str, Any, str] | None:  # fmt: skip
    """The first thing wrong with `axes`, as (where: `""` for the list, `"[n]"` for axis n,
    `"[n].key"` for its field; the value; what is allowed), or None. An axis negates its `obs` and
    `action` entries; its `key` (an entry, or entry i minus entry j) must be among its own `obs`
    entries, so that reflecting makes it positive, and among no other axis's, so that another
    axis's reflection leaves it as it is. With the sizes, every entry must lie inside them."""
    if not isinstance(axes, list) or not axes:
        return "", axes, f"must be {SHAPE}"
    for n, axis in enumerate(axes):
        if not isinstance(axis, dict) or set(axis) != {"key", "obs", "action"}:
            return f"[{n}]", axis, f"must be {SHAPE}"
        for name in ("key", "obs", "action"):
            entries = axis[name]
            if not isinstance(entries, list) or not all(type(i) is int and i >= 0 for i in entries):
                return f"[{n}].{name}", entries, f"must be {SHAPE}"
            if len(set(entries)) != len(entries) or not entries:
                return f"[{n}].{name}", entries, "must name distinct entries, at least one"
            size = {"action": action_dim}.get(name, obs_dim)
            if size is not None and max(entries) >= size:
                return f"[{n}].{name}", entries, f"must lie in [0, {size}) for this env"
        if len(axis["key"]) > 2:
            return f"[{n}].key", axis["key"], "must name one or two observation entries"
    for n, axis in enumerate(axes):  # every axis well formed: their keys against each other's entries
        for other, rest in enumerate(axes):
            for i in axis["key"]:
                if (i in rest["obs"]) != (other == n):
                    why = "its own obs entries" if other == n else f"axis {other}'s obs entries, only its own"
                    return f"[{n}].key", axis["key"], f"must be among {why} (entry {i})"
    return None
