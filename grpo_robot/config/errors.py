"""Hydra's composition errors (several lines, a hint about HYDRA_FULL_ERROR) reduced to the
one-line form of `ConfigError`: the override or key, what is wrong, and the close match or the
allowed values when there are some."""

from __future__ import annotations

import difflib
import re
import sys
from typing import Any

_NOISE = ("full_key", "reference_type", "object_type", "Set the environment variable", "See https://hydra.cc",
          "Config search path", "provider=")  # fmt: skip


def _close(word: str, options: list[str], prefix: str = "") -> str:
    match = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {prefix}{match[0]}?)" if match else ""


def _value_at(node: Any, path: str) -> Any:
    """The value at dotted `path` of the config `node`, or None (none there, or it cannot resolve)."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(node, path) if node is not None else None
    except Exception:  # noqa: BLE001
        return None


def _keys_at(node: Any, path: str) -> list[str]:
    """The keys of the config node at dotted `path` of `node` (empty when there is none)."""
    from omegaconf import DictConfig, OmegaConf

    if node is None:
        return []
    try:
        sub = OmegaConf.select(node, path) if path else node
    except Exception:  # noqa: BLE001  (an interpolation that cannot resolve here)
        return []
    return [str(k) for k in sub.keys() if str(k) != "hydra"] if isinstance(sub, DictConfig) else []


def _schema_keys(path: str) -> list[str]:
    """The keys the schema gives the node at `path` of a training config (spelled as in configs)."""
    import dataclasses

    from grpo_robot.config import schema
    from grpo_robot.config.store import schema_field

    field = schema_field(path) if path else None
    node: Any = getattr(schema, str(field.type), None) if field is not None else schema.TrainConfig
    if path and field is None or not dataclasses.is_dataclass(node):
        return []
    return ["import" if f.name == "imports" else f.name for f in dataclasses.fields(node)]


def unknown_key_message(key: str, options: list[str]) -> str:
    """`algo.lrr is not a key of algo (did you mean algo.lr?); keys: ...`."""
    parent, _, leaf = key.rpartition(".")
    where = f"a key of {parent}" if parent else "a top-level key"
    hint = _close(leaf, options, f"{parent}." if parent else "")
    listed = f"; keys: {', '.join(options)}" if options and len(options) <= 40 else ""
    return f"{key} is not {where}{hint}{listed}"


def _details(err: BaseException) -> tuple[str, list[str]]:
    """(the whole text of `err` and its cause, its meaningful lines)."""
    text = str(err).strip()
    if err.__cause__ is not None:  # Hydra wraps OmegaConf's error, which says what is wrong
        text = f"{text}\n{str(err.__cause__).strip()}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return text, [line for line in lines if not line.startswith(_NOISE)]


def _full_key(err: BaseException) -> str | None:
    for e in (err.__cause__, err):
        key = getattr(e, "full_key", None) if e is not None else None
        if key:
            return str(key)
    m = re.search(r"full_key: (\S+)", f"{err}\n{err.__cause__ or ''}")
    return m.group(1) if m else None


def value_reason(line: str) -> str:
    """OmegaConf's reason without the value it repeats."""
    reason = re.sub(r"^Value '.*?' (of type '[\w.]+' )?", "", line).rstrip(".")
    if "is not a valid bool" in reason:
        return "must be true or false"
    if reason == "could not be converted to Integer":
        return "must be a whole number, e.g. 2048 or 6e6"
    if reason == "could not be converted to Float":
        return "must be a number, e.g. 0.5 or 3e-4"
    return reason


def one_line(err: BaseException, prefix: str = "") -> str:
    """One line for an OmegaConf error met outside Hydra's composition (converting a composed
    node to its dataclass); `prefix` is the path of that node."""
    _, lines = _details(err)
    key = _full_key(err)
    reason = value_reason(lines[0]) if lines else type(err).__name__
    if "Missing mandatory value" in reason and key:
        return f"{prefix}{key} is missing: give {prefix}{key}=..."
    return f"{prefix}{key} is invalid: {reason}" if key else reason


def _overrides(overrides: list[str] | None) -> list[str]:
    """The command line's overrides (Hydra's flags left out) when the caller gives none."""
    if overrides is not None:
        return list(overrides)
    return [a for a in sys.argv[1:] if not a.startswith("-")]


def _unparsable(overrides: list[str]) -> tuple[str, str] | None:
    """The first override Hydra's grammar refuses, with its reason."""
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser
    except ImportError:  # pragma: no cover
        return None
    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except Exception as err:  # noqa: BLE001  (OverrideParseException and others)
            first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
            return override, first
    return None


def _group_options(group: str) -> list[str]:
    """The options of config group `group`: the files conf/<group>/*.yaml installed with the package."""
    from importlib.resources import files

    try:
        folder = files("grpo_robot.conf").joinpath(*group.split("/"))
        return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))
    except (ModuleNotFoundError, OSError, ValueError):
        return []


def hydra_error_line(err: BaseException, base: Any = None, overrides: list[str] | None = None) -> str:
    """One line for a Hydra/OmegaConf composition or override-parsing error. `base`: the config
    composed without overrides, where the keys of a misspelled key's parent are looked up;
    `overrides`: the command line's (sys.argv's when not given), to find the one at fault."""
    text, lines = _details(err)
    first = lines[0] if lines else type(err).__name__
    overrides = _overrides(overrides)

    m = re.search(r"Could not (?:find|load) '([^']+)/([^']*)'", text)
    if m:  # an unknown option of a config group: env=push_cub (or none: env=)
        group, option = m.groups()
        if not option:
            options = _group_options(group)
            return f"{group}= is invalid: give one of its options ({', '.join(options)}), or ~{group} to drop it"
        options = [line.strip() for line in text.split(f"Available options in '{group}':", 1)[-1].splitlines()]
        options = options[: options.index("Config search path:")] if "Config search path:" in options else options
        options = [o for o in options if o and "=" not in o and "/" not in o and ":" not in o]
        options = options or _group_options(group)
        listed = f"; options: {', '.join(options)}" if options else ""
        return f"{group}={option} is not an option of {group}{_close(option, options)}{listed}"

    m = re.search(r"Could not override '([^']+)'", text)
    if m and re.search(r"Key '[^']+' (?:is )?not in", text):  # a misspelled key: algo.lrr=1
        key = m.group(1)
        missing = _full_key(err)
        if missing and key.startswith(missing) and missing != key:
            key = missing  # a node above the key is missing: env.kwargs.x=1 on a built-in task's env
        return _unknown_key(key, base)

    m = re.search(r"Key '([^']+)' not in '(\w+)'", text)
    if m:  # a key appended with + (or ++) that the schema does not have: +algo.lrr=1
        return _unknown_key(_full_key(err) or m.group(1), base)

    m = re.search(r"An item is already at '([^']+)'", text)
    if m:  # +algo.lr=3 where algo.lr exists
        key = m.group(1)
        given = next((o for o in overrides if o.lstrip("+").split("=", 1)[0] == key), f"+{key}=...")
        return f"{given}: {key} exists already; set it without the +: {given.lstrip('+')}"

    m = re.search(r"Error merging override (\S+)", first)
    if m:  # a value that does not fit the key: algo.lr=abc, algo.lr=null, algo.clip=3, ~algo.lr
        override = m.group(1)
        key, _, value = override.partition("=")
        reason = value_reason(next((line for line in lines[1:]), "wrong type"))
        if key.startswith("~") or "does not support deletion" in reason:
            key = key.lstrip("~")
            return f"~{key} is invalid: {key} is a key of the schema and cannot be removed; set it instead: {key}=..."
        if "is not Optional" in reason:
            return f"{key}=null is invalid: {key} cannot be null; give it a value"
        m = re.search(r"is not a subclass of (\w+)", reason)
        if m:
            keys = _keys_at(base, key) or _schema_keys(key)
            example = f", e.g. {key}.{keys[0]}=..." if keys else ""
            return (f"{key}={value!r} is invalid: {key} is a group of keys ({', '.join(keys)}), not a value; "
                    f"set one of them{example}")  # fmt: skip
        if "Cannot merge DictConfig with ListConfig" in reason:
            reason = "must be a list, e.g. [1, 2]"
        elif "Cannot merge ListConfig with DictConfig" in reason:
            reason = "must be a mapping, e.g. {a: 1}"
        return f"{key}={value!r} is invalid: {reason}"

    if "Missing mandatory value" in text:
        key = _full_key(err) or first.rsplit(":", 1)[-1].strip()
        return f"{key} is missing: give {key}=..."

    if "Interpolation" in text or "interpolation" in text:
        key = _full_key(err)
        given = next((o for o in overrides if key and o.lstrip("+~").split("=", 1)[0] == key), None)
        what = given or key or "an interpolation"
        return f"{what} is invalid: {first[0].lower()}{first[1:]}"

    if "Config group override must be a string or a list" in text:  # env=null, =3
        bad = next((o for o in overrides if o.split("=", 1)[0].lstrip("+~") == ""), None)
        if bad is not None:
            return f"{bad!r} is invalid: an override needs a key: key=value"
        bad = next((o for o in overrides if o.split("=", 1)[-1] in ("null", "None", "~")), None)
        if bad is not None:
            group = bad.split("=", 1)[0].lstrip("+")
            options = _group_options(group)
            listed = f" ({', '.join(options)})" if options else ""
            return (
                f"{bad} is invalid: {group} is a config group; give one of its options{listed}, or ~{group} to drop it"
            )

    m = re.search(r"Ambiguous value for argument '([^']+)'", text)
    if m:  # algo.lr=1,2 without --multirun
        override = m.group(1)
        key, _, value = override.partition("=")
        return (f"{override} is ambiguous: a list is {key}=[{value}], a string {key}='{value}', and a sweep over "
                f"the values needs --multirun")  # fmt: skip

    parse_error = type(err).__name__ == "OverrideParseException" or "mismatched input" in text or "no viable" in text
    if parse_error or "LexerNoViableAltException" in text:
        culprit = _unparsable(overrides)
        if culprit is not None:
            override, why = culprit
            why = why.replace("LexerNoViableAltException: ", "unexpected character in ")
            return f"cannot parse the override {override!r}: {why} (quote a value with special characters: key='...')"
        return f"cannot parse the override: {first}"

    detail = next(iter(lines[1:]), "")
    return f"{first} {detail}".strip()


def _unknown_key(key: str, base: Any) -> str:
    parent, _, leaf = key.rpartition(".")
    options = _keys_at(base, parent)
    message = unknown_key_message(key, options)
    if parent == "env" and leaf in _schema_keys("env") and leaf not in options:
        # the env node is untyped: a built-in task's preset sets only some of the env's keys
        from grpo_robot.config.validate import GYM_ONLY_ENV_KEYS

        task = _value_at(base, "env.task")
        if task and ("imports" if leaf == "import" else leaf) in GYM_ONLY_ENV_KEYS:
            message += f" (only Gymnasium envs use it; the built-in task env.task={task} has no use for it)"
        elif not task and leaf == "nthread":
            message += " (only built-in tasks use it; a Gymnasium env steps its own worlds)"
        else:
            message += f" (this env preset does not set it; add it with +{key}=...)"
    return message
