"""Hydra's composition errors (several lines, a hint about HYDRA_FULL_ERROR) reduced to the
one-line form of `ConfigError`: the override, what is wrong, and the close match when there is one."""

from __future__ import annotations

import difflib
import re
from typing import Any


def _close(word: str, options: list[str], prefix: str = "") -> str:
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {prefix}{match[0]}?)" if match else ""


def _keys_at(node: Any, path: str) -> list[str]:
    """The keys of the config node at dotted `path` of `node` (empty when there is none)."""
    from omegaconf import DictConfig, OmegaConf

    try:
        sub = OmegaConf.select(node, path) if path else node
    except Exception:  # noqa: BLE001  (an interpolation that cannot resolve here)
        return []
    return [str(k) for k in sub.keys()] if isinstance(sub, DictConfig) else []


def hydra_error_line(err: BaseException, base: Any = None) -> str:
    """One line for a Hydra/OmegaConf composition or override-parsing error. `base`: the config
    composed without overrides, where the keys of a misspelled key's parent are looked up."""
    text = str(err).strip()
    if err.__cause__ is not None:  # Hydra wraps OmegaConf's error, which says what is wrong
        text = f"{text}\n{str(err.__cause__).strip()}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else type(err).__name__

    m = re.search(r"Could not find '([^']+)/([^']+)'", text)
    if m:  # an unknown option of a config group: env=push_cub
        group, option = m.groups()
        options = [line.strip() for line in text.split(f"Available options in '{group}':", 1)[-1].splitlines()]
        options = [o for o in options if o and not o.startswith("Config search path")]
        options = options[: options.index("Config search path:")] if "Config search path:" in options else options
        options = [o for o in options if "=" not in o and "/" not in o and ":" not in o]
        listed = f"; options: {', '.join(options)}" if options else ""
        return f"{group}={option} is not an option of {group}{_close(option, options)}{listed}"

    m = re.search(r"Could not override '([^']+)'", text)
    if m and re.search(r"Key '[^']+' (?:is )?not in", text):  # a misspelled key: algo.lrr=1
        key = m.group(1)
        parent, _, leaf = key.rpartition(".")
        options = _keys_at(base, parent) if base is not None else []
        where = f"a key of {parent}" if parent else "a top-level key"
        known = f"; keys: {', '.join(o for o in options if o != 'hydra')}" if options and len(options) <= 40 else ""
        return f"{key} is not {where}{_close(leaf, options, f'{parent}.' if parent else '')}{known}"

    m = re.search(r"Error merging override (\S+?)=(.*)", first)
    if m:  # a value of the wrong type: algo.lr=abc
        key, value = m.groups()
        reason = next((line for line in lines[1:] if not line.startswith(("full_key", "reference_type",
                                                                           "object_type"))), "")  # fmt: skip
        reason = re.sub(r"^Value '.*?' (of type '\w+' )?", "", reason).rstrip(".")
        return f"{key}={value!r} is invalid: {reason or 'wrong type'}"

    if type(err).__name__ == "OverrideParseException" or "mismatched input" in text or "no viable" in text:
        return f"cannot parse the override: {first}"

    detail = next((line for line in lines[1:] if not line.startswith(("full_key", "reference_type", "object_type",
                                                                       "Set the environment variable"))), "")  # fmt: skip
    return f"{first} {detail}".strip()
