"""Checkpoints: plain dicts of tensors and primitives, loadable with `torch.load(weights_only=True)`,
written atomically so a crash mid-write never leaves a truncated file behind.

Reading (`load`) refuses anything that is not a checkpoint this toolkit wrote, with a one-line
`CheckpointError` naming the file and what is wrong: an empty, truncated or foreign file, a pickle
that holds Python objects (refused without running them), a bare tensor, missing keys, another
format version, non-finite weights, weights that do not fit the policy the record describes, and
for `purpose="resume"` a behaviour-cloning checkpoint. Writing (`save_atomic`, `write_text_atomic`)
refuses non-finite tensors before touching the disk (`NonFiniteError`), and an `OSError` while
writing becomes a one-line `WriteError`; in every failure the previous file is left as it was and no
temporary file remains.
"""

from __future__ import annotations

import errno
import inspect
import io
import numbers
import os
import pickletools
import tempfile
import zipfile
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import torch

from grpo_robot.policies import POLICIES, Policy, build_policy

FORMAT_VERSION = 1
PURPOSES = (None, "evaluate", "resume", "init_from")
POLICY_KEYS = ("type", "obs_dim", "action_dim", "kwargs", "state_dict")
# what each use of a checkpoint reads from it, beyond format_version
REQUIRED_KEYS = {
    None: ("policy", "config"),
    "evaluate": ("policy", "config"),
    "init_from": ("policy",),
    "resume": ("iteration", "env_steps", "best_eval", "config", "policy", "optimizer"),
}
USES = {
    None: "(training and pretrain_bc write format_version, config and policy)",
    "evaluate": "to evaluate",
    "init_from": "to start a run from (init_from)",
    "resume": "to resume a run from",
}


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: one line naming the file and what is wrong."""


class NonFiniteError(ValueError):
    """A checkpoint about to be written holds a NaN or infinite tensor value (nothing was written)."""


class UnsafeState(ValueError):
    """A hook's `state_dict()` holds what a checkpoint cannot keep: it would be written, then
    refused when read back (checkpoints are loaded with `weights_only=True`)."""


def check_plain(value: Any, where: str) -> None:
    """`UnsafeState` naming `where` and the first item of `value` that is not a tensor or plain
    data (None, bool, int, float, str, and lists, tuples and dicts of them, keyed by str or int)."""
    if value is None or type(value) in (bool, int, float, str) or isinstance(value, torch.Tensor):
        return  # exact types: numpy's float64 is a float, and a checkpoint cannot keep it
    if type(value) in (list, tuple):
        for i, item in enumerate(value):
            check_plain(item, f"{where}[{i}]")
        return
    if type(value) in (dict, OrderedDict):
        for key, item in value.items():
            if type(key) not in (str, int):
                raise UnsafeState(f"{where} has a key of type {type(key).__name__}; a checkpoint keeps str or int keys")
            check_plain(item, f"{where}[{key!r}]")
        return
    raise UnsafeState(f"{where} is a {type(value).__module__}.{type(value).__name__}; a checkpoint keeps tensors and "
                      "plain data (None, bool, int, float, str, lists and dicts of them): convert it (float(x), "
                      "torch.as_tensor(a))")  # fmt: skip


class WriteError(OSError):
    """Writing a file failed (disk full, file-size limit, permissions...); the previous file there,
    if any, is intact and no temporary file is left. `errno` and `strerror` are the cause's."""

    def __init__(self, path: str | Path, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        name = errno.errorcode.get(cause.errno, str(cause.errno)) if cause.errno is not None else "unknown"
        reason = cause.strerror or str(cause) or type(cause).__name__
        self.path = Path(path)
        self.message = f"cannot write {path}: {reason} (errno {name}); the previous file there, if any, is intact"

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # picklable (to cross a process boundary) despite the constructor's arguments
        return WriteError, (self.path, OSError(self.errno, self.strerror))


class Checkpoint(dict):
    """A loaded checkpoint: the dict as saved, and `path`, the file it came from (`save_atomic`
    writes it back as a plain dict)."""

    path: Path | None = None


# -- writing ------------------------------------------------------------------------------------
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once at import (reading it means setting it)
@contextmanager
def atomic_file(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write `path` through: a temporary file in the same folder, fsynced and
    renamed over `path` when the block ends without error (the folder fsynced after, so that the
    rename itself outlives a power cut), removed when it raises. An `OSError` becomes a
    `WriteError` (one line; the previous file at `path` is intact)."""
    path = Path(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:  # closes the descriptor whatever fails below
            os.fchmod(f.fileno(), 0o666 & ~_UMASK)  # the mode open() would give, not mkstemp's private 0600
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_folder(path.parent)
    except BaseException as err:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and not isinstance(err, WriteError):
            raise WriteError(path, err) from None
        raise


def _fsync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable; where a folder cannot be opened or synced (some
    platforms and file systems), the rename stands as the OS keeps it."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes_atomic(path: str | Path, data: bytes | memoryview) -> None:
    """Write `data` to `path` atomically (see `atomic_file`; `WriteError` on failure)."""
    with atomic_file(path) as f:
        f.write(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically, for JSON and YAML files (see `atomic_file`)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def save_atomic(obj: dict[str, Any], path: str | Path) -> None:
    """`torch.save` to `path` atomically: serialized in memory first, refused with `NonFiniteError`
    (nothing written) if any floating tensor anywhere in `obj` holds NaN or inf, then written
    through `atomic_file` (`WriteError` on an `OSError`)."""
    bad = first_non_finite(obj)
    if bad is not None:
        raise NonFiniteError(f"refusing to write {path}: {bad}; the previous file there, if any, is intact")
    if isinstance(obj, Checkpoint):  # a loaded one, saved again: as the plain dict it was read from
        obj = dict(obj)
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_bytes_atomic(path, buffer.getbuffer())


def first_non_finite(obj: Any, where: str = "") -> str | None:
    """A description of the first floating tensor in `obj` (nested dicts, lists, tuples) that
    holds NaN or inf, naming its key path and the first bad index; None when all are finite."""
    if isinstance(obj, torch.Tensor):
        if (obj.is_floating_point() or obj.is_complex()) and not bool(torch.isfinite(obj).all()):
            bad = (~torch.isfinite(obj)).nonzero()[0].tolist()
            value = obj[tuple(bad)].item()
            return f"tensor {where or '<root>'} holds non-finite values (the first: {value} at index {bad})"
        return None
    if isinstance(obj, dict):
        items: Any = obj.items()
    elif isinstance(obj, list | tuple):
        items = enumerate(obj)
    else:
        return None
    for key, value in items:
        found = first_non_finite(value, f"{where}/{key}" if where else str(key))
        if found is not None:
            return found
    return None


# -- reading ------------------------------------------------------------------------------------
def resolve(path: str | Path) -> Path:
    """A checkpoint file, or a run directory meaning its `checkpoints/last.pt` (or the run's
    `checkpoints` folder itself, meaning its `last.pt`)."""
    path = Path(path)
    if path.is_dir():
        inside = path / "last.pt"
        path = inside if inside.is_file() and not (path / "checkpoints").is_dir() else path / "checkpoints" / "last.pt"
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path} (give a .pt file or a run directory)")
    return path


def load(path: str | Path, map_location: str | torch.device = "cpu", purpose: str | None = None) -> Checkpoint:
    """The checkpoint at `path` (a file, or a run directory's `checkpoints/last.pt`), checked for
    `purpose`: "evaluate" (the policy and its config), "init_from" (the policy) or "resume" (all
    of a training run's state); None (the default) checks what every checkpoint holds, the policy
    and its config, as "evaluate" does. Anything unusable is a one-line `CheckpointError`."""
    if purpose not in PURPOSES:
        raise ValueError(f"purpose={purpose!r}: must be one of {', '.join(map(repr, PURPOSES))}")
    path = resolve(path)
    ckpt = Checkpoint(_read(path, map_location))
    ckpt.path = path
    config = ckpt.get("config")
    plugins = config.get("plugins") if isinstance(config, dict) else None
    if plugins:  # the modules that registered its policy, advantage or loss
        from grpo_robot.registry import import_plugins

        try:
            import_plugins(list(plugins), f"{path}: the run's plugins")
        except ValueError as err:
            raise CheckpointError(str(err)) from None
    check(ckpt, path, purpose)
    return ckpt


def _read(path: Path, map_location: str | torch.device) -> dict[str, Any]:
    try:
        size = path.stat().st_size
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err.strerror or err}") from None
    if size == 0:
        raise CheckpointError(f"{path} is empty (0 bytes), not a checkpoint")
    try:
        obj = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # what torch raises for a bad file varies: name what the file is instead
        raise CheckpointError(_unreadable(path, size, err)) from None
    bad = _failed_crc(path)
    if bad is not None:  # torch reads the tensors' bytes without checking them: altered weights would load
        raise CheckpointError(f"{path} is corrupt ({size} bytes): its entry {bad} fails its CRC check")
    if not isinstance(obj, dict):
        kind = "a bare tensor" if isinstance(obj, torch.Tensor) else f"a {type(obj).__name__}"
        raise CheckpointError(f"{path} holds {kind}, not a checkpoint (a dict with format_version, config and "
                              "policy, as training and pretrain_bc write)")  # fmt: skip
    return obj


def _failed_crc(path: Path) -> str | None:
    """The first entry of the checkpoint's zip archive whose bytes fail their CRC-32, or None (also
    for a legacy, non-zip checkpoint, which has none)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip()
    except zipfile.BadZipFile:
        return None


def _unreadable(path: Path, size: int, err: Exception) -> str:
    """Why `torch.load(path, weights_only=True)` failed, in one line that suggests nothing unsafe."""
    if _holds_python_objects(path, err):
        return (f"{path} is not a trusted checkpoint: it holds Python objects other than tensors and plain "
                "data, and is refused without running them")  # fmt: skip
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as read_err:  # no permission to read it, say
        return f"cannot read {path}: {read_err.strerror or read_err}"
    if head.startswith(b"PK"):
        import zipfile

        if zipfile.is_zipfile(path):
            try:
                with zipfile.ZipFile(path) as archive:
                    names = archive.namelist()
            except (zipfile.BadZipFile, OSError):
                names = []
            if names and not any(n.endswith("data.pkl") for n in names):  # a whole zip, not torch's layout
                kind = "a numpy .npz archive (a demo dataset?)" if all(n.endswith(".npy") for n in names) else \
                    "a zip archive"  # fmt: skip
                return f"{path} is not a PyTorch checkpoint ({size} bytes): it is {kind}"
        return f"{path} is truncated or corrupt ({size} bytes): its zip archive cannot be read"
    return f"{path} is not a PyTorch checkpoint ({size} bytes, neither a zip archive nor a pickle of tensors)"


# modules whose globals a checkpoint's pickle may name: torch's tensor rebuilding and plain containers
SAFE_MODULES = ("torch", "collections")
STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"}


def _holds_python_objects(path: Path, err: Exception) -> bool:
    """Whether the file is a pickle (inside a zip archive or bare) that names globals outside
    tensors and plain data. The pickle's opcodes are only listed, never executed."""
    context = f"{err} {err.__context__ or ''}"
    if "Unsupported global" in context or "Unsupported class" in context:
        return True
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                names = [n for n in z.namelist() if n.endswith("data.pkl")]
                if not names:
                    return False
                data = z.read(names[0])
        else:
            data = path.read_bytes()
    except Exception:
        return False
    strings: list[str] = []
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name in STRING_OPS:
                strings.append(str(arg))
            elif op.name in ("GLOBAL", "INST"):
                module = str(arg).split(" ", 1)[0]
                if module.split(".")[0] not in SAFE_MODULES:
                    return True
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                if strings[-2].split(".")[0] not in SAFE_MODULES:
                    return True
    except Exception:  # not (or no longer) a pickle: whatever it named so far decided
        return False
    return False


def check(ckpt: dict[str, Any], path: str | Path, purpose: str | None = None) -> None:
    """`CheckpointError` unless `ckpt` (read from `path`) holds what `purpose` needs, with finite
    policy weights that fit the architecture its record describes."""
    version = ckpt.get("format_version")
    if version != FORMAT_VERSION:
        found = "no format_version" if "format_version" not in ckpt else f"format_version {version!r}"
        raise CheckpointError(f"{path} has {found}; this toolkit reads checkpoint format {FORMAT_VERSION}")
    if purpose == "resume" and is_bc(ckpt):
        raise CheckpointError(f"{path} is a behaviour-cloning checkpoint (no optimizer state or iteration count); "
                              f"start a run from it with init_from={path}")  # fmt: skip
    missing = [key for key in REQUIRED_KEYS[purpose] if key not in ckpt]
    if missing:
        raise CheckpointError(f"{path} lacks {', '.join(missing)}: not a checkpoint {USES[purpose]}")
    policy = build(ckpt["policy"], str(path))
    if "config" in REQUIRED_KEYS[purpose]:
        _check_config(ckpt["config"], path)
    if purpose == "resume":
        _check_resume_state(ckpt, policy, path)


def is_bc(ckpt: dict[str, Any]) -> bool:
    """Whether `ckpt` was written by behaviour cloning (`bc.checkpoint_from_bc`), not by a run."""
    return ckpt.get("kind") == "bc" or ("bc" in ckpt and "optimizer" not in ckpt)


def build(record: Any, where: str) -> Policy:
    """The policy of `record` with its weights, on the CPU; any flaw is a one-line `CheckpointError`."""
    if not isinstance(record, dict):
        raise CheckpointError(f"{where}: its policy record is a {type(record).__name__}, not a dict with "
                              f"{', '.join(POLICY_KEYS)}")  # fmt: skip
    missing = [key for key in POLICY_KEYS if key not in record]
    if missing:
        raise CheckpointError(f"{where}: its policy record lacks {', '.join(missing)}")
    kind, obs_dim, action_dim, kwargs, state = (record[key] for key in POLICY_KEYS)
    if kind not in POLICIES:
        raise CheckpointError(f"{where}: its policy type {kind!r} is unknown; known: {', '.join(POLICIES)}")
    for name, value in (("obs_dim", obs_dim), ("action_dim", action_dim)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise CheckpointError(f"{where}: its policy {name}={value!r} is not a positive integer")
    if not isinstance(kwargs, dict):
        raise CheckpointError(f"{where}: its policy kwargs are a {type(kwargs).__name__}, not a dict")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{where}: its policy state_dict is not a dict of tensors")
    bad = first_non_finite(state)
    if bad is not None:
        raise CheckpointError(f"{where}: the policy state_dict's {bad}")
    try:
        with torch.random.fork_rng(devices=[]):  # building draws initial weights: leave the global RNG be
            policy = build_policy(kind, obs_dim, action_dim, **kwargs)
    except Exception as err:
        raise CheckpointError(f"{where}: its policy record ({kind}, obs_dim={obs_dim}, action_dim={action_dim}, "
                              f"kwargs={kwargs}) does not build: {one_line(err)}") from None  # fmt: skip
    mismatch = state_dict_mismatch(state, policy.state_dict())
    if mismatch:
        raise CheckpointError(f"{where}: the policy weights do not fit the {kind} policy its record describes "
                              f"(obs_dim={obs_dim}, action_dim={action_dim}, {_kwargs_text(kwargs)}): "
                              f"{mismatch}")  # fmt: skip
    try:
        policy.load_state_dict(state)
    except Exception as err:
        raise CheckpointError(f"{where}: the policy weights do not load: {one_line(err)}") from None
    return policy


def state_dict_mismatch(state: dict[str, Any], expected: dict[str, torch.Tensor]) -> str:
    """'' when `state` has exactly the keys and shapes of `expected`, else what differs (one line)."""
    problems = []
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing:
        problems.append(f"missing {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
    if unexpected:
        problems.append(f"unexpected {', '.join(unexpected[:4])}{' ...' if len(unexpected) > 4 else ''}")
    for key, want in expected.items():
        have = state.get(key)
        if isinstance(have, torch.Tensor) and have.shape != want.shape:
            problems.append(f"{key} is {list(have.shape)}, expected {list(want.shape)}")
    return "; ".join(problems)


def _check_config(config: Any, path: Path) -> None:
    from grpo_robot.config import to_train_config

    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: its config is a {type(config).__name__}, not a training config")
    try:
        to_train_config(config)
    except Exception as err:
        raise CheckpointError(f"{path}: its config is not a valid training config: {one_line(err)}") from None


def _check_resume_state(ckpt: dict[str, Any], policy: Policy, path: str | Path) -> None:
    """What resuming reads beyond the policy: counts, an optimizer state that fits `policy` (and a
    critic after it, if the checkpoint holds one), a reference of the policy's shapes, all finite."""
    for key in ("iteration", "env_steps"):
        if not isinstance(ckpt[key], numbers.Integral) or isinstance(ckpt[key], bool) or ckpt[key] < 0:
            raise CheckpointError(f"{path}: its {key}={ckpt[key]!r} is not a count")
    if not isinstance(ckpt["best_eval"], numbers.Real):
        raise CheckpointError(f"{path}: its best_eval={ckpt['best_eval']!r} is not a number")
    optimizer = ckpt["optimizer"]
    groups = optimizer.get("param_groups") if isinstance(optimizer, dict) else None
    if not (isinstance(optimizer.get("state") if isinstance(optimizer, dict) else None, dict)
            and isinstance(groups, list) and all(isinstance(g, dict) and isinstance(g.get("params"), list)
                                                 for g in groups)):  # fmt: skip
        raise CheckpointError(f"{path}: its optimizer state is not an optimizer's state_dict (state, param_groups)")
    for key in ("reference", "critic"):
        value = ckpt.get(key)
        if value is not None and not (isinstance(value, dict) and all(isinstance(v, torch.Tensor)
                                                                      for v in value.values())):  # fmt: skip
            raise CheckpointError(f"{path}: its {key} is not a state_dict of tensors")
    _check_run_state(ckpt, path)
    bad = first_non_finite({k: ckpt.get(k) for k in ("optimizer", "reference", "critic")})
    if bad is not None:
        raise CheckpointError(f"{path}: the {bad}")
    if ckpt.get("reference") is not None:
        mismatch = state_dict_mismatch(ckpt["reference"], policy.state_dict())
        if mismatch:
            raise CheckpointError(f"{path}: its reference policy does not fit the policy: {mismatch}")
    _check_optimizer_fits(optimizer, optimizer_order(policy), ckpt.get("critic") is not None, path)


def _check_run_state(ckpt: dict[str, Any], path: str | Path) -> None:
    """The start-replay buffer's and the hooks' states and the target's record, where the checkpoint
    holds them (None where it was written without): the layouts `StartReplay.state_dict` and
    `Trainer.state` write."""
    replay = ckpt.get("start_replay")
    if replay is not None:
        columns = [replay.get(k) for k in ("seeds", "rates", "replays")] if isinstance(replay, dict) else [None]
        if not (all(isinstance(c, list) for c in columns) and len({len(c) for c in columns}) == 1
                and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for c in columns for v in c)):
            raise CheckpointError(f"{path}: its start_replay is not a replay buffer's state (seeds, rates and "
                                  "replays: lists of numbers, one entry per start)")  # fmt: skip
    hooks = ckpt.get("hooks")
    if hooks is not None and not (isinstance(hooks, dict) and all(isinstance(v, dict) for v in hooks.values())):
        raise CheckpointError(f"{path}: its hooks is not a state per hook (a dict of dicts)")
    skipped = ckpt.get("skipped_in_a_row")
    if skipped is not None and not (isinstance(skipped, numbers.Integral) and not isinstance(skipped, bool)
                                    and skipped >= 0):  # fmt: skip
        raise CheckpointError(f"{path}: its skipped_in_a_row={skipped!r} is not a count")
    target = ckpt.get("target")
    if target is not None and not (isinstance(target, dict) and isinstance(target.get("reached", False), bool)):
        raise CheckpointError(f"{path}: its target is not a record of the target success (a dict with 'reached')")


def one_line(err: BaseException) -> str:
    """`Type: message` of an exception on one line (whitespace collapsed, at most 300 characters)."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[:300]}" if text else type(err).__name__


def _kwargs_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in kwargs.items())


def policy_record(policy: Policy) -> dict[str, Any]:
    return {
        "type": policy.type,
        "obs_dim": policy.obs_dim,
        "action_dim": policy.action_dim,
        "kwargs": policy.init_kwargs(),
        "state_dict": policy.state_dict(),
    }


def policy_from_record(record: dict[str, Any], device: str | torch.device = "cpu", where: str = "checkpoint") -> Policy:
    """The policy a `policy_record` describes, with its weights, on `device`; a record that is
    incomplete, non-finite or does not fit is a one-line `CheckpointError` naming `where`."""
    return build(record, str(where)).to(device)


# architecture keys that must match between an init_from checkpoint and the config; the
# others (temperature, init_std) are sampling settings: a clone takes the config's init_std, a
# trained policy keeps its learned std (initial_policy_weights)
ARCHITECTURE_KEYS = ("hidden_sizes", "activation", "obs_norm", "state_dependent_std", "squash", "bins", "head",
                     "learn_temperature", "bin_logits", "embed_dim", "mirror")  # fmt: skip


def _full_kwargs(kind: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` with the constructor's defaults for the keys it lacks: a checkpoint written before
    an option existed was built with that option's default."""
    from grpo_robot.policies.base import POLICIES

    if kind not in POLICIES or not isinstance(kwargs, dict):
        return kwargs
    params = inspect.signature(POLICIES[kind].__init__).parameters.values()
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    return {**{k: v for k, v in defaults.items() if k not in ("obs_dim", "action_dim")}, **kwargs}


def initial_policy_weights(path: str, cfg, env, device: torch.device,
                           policy: Policy | None = None) -> dict[str, torch.Tensor]:  # fmt: skip
    """The state_dict of the policy in checkpoint `path` (a BC or training checkpoint), after
    checking that it fits the `TrainConfig` `cfg` and `env` (name, obs_dim, action_dim); a mismatch
    raises `ValueError` naming both sides. With `policy` (built from `cfg`): a clone whose std
    cloning kept as it was built (`bc.learn_std=false`, the default) takes `policy`'s std
    parameters (`policy.init_std`), since they are a sampling setting of the clone, not learned;
    a training checkpoint, or a clone that learned its std, keeps its own."""
    ckpt = load(path, map_location=device, purpose="init_from")
    _check_fit(ckpt, cfg, f"init_from={path!s}", env)
    weights = dict(ckpt["policy"]["state_dict"])
    if policy is not None and clone_kept_its_std(ckpt):
        names = {id(p): name for name, p in policy.named_parameters()}
        weights.update({names[id(p)]: p.detach().clone() for p in policy.std_parameters()})
    return weights


def clone_kept_its_std(ckpt: dict[str, Any]) -> bool:
    """Whether `ckpt` is a behaviour clone whose std parameters cloning did not train."""
    bc = (ckpt.get("config") or {}).get("bc") or {}
    return is_bc(ckpt) and not bc.get("learn_std", False)


def check_init_from(cfg) -> None:
    """The checks of `initial_policy_weights` that need no env, on the `TrainConfig` `cfg`'s
    `init_from`: the file is a usable checkpoint whose policy has the config's type, whose env is
    the config's as far as the config tells (the task and its version, or the Gymnasium id or
    entry point, its kwargs and any observation keys it names; the sizes need the env), and whose
    architecture is the config's. The CLI makes them before it creates a run directory; a
    mismatch is one line naming both sides."""
    path = cfg.init_from
    _check_fit(load(path, map_location="cpu", purpose="init_from"), cfg, f"init_from={path!s}")


def _check_fit(ckpt: dict[str, Any], cfg, where: str, env=None) -> None:
    """An `init_from` checkpoint's fit to `cfg`, in this order: the policy type, the env (its
    config; with `env`, also the env's observation keys and sizes), the architecture."""
    _check_policy_type(ckpt["policy"], cfg, where)
    check_env(ckpt, cfg.env, where, env)
    _check_architecture(ckpt["policy"], cfg, where)


def check_env(ckpt: dict[str, Any], env_cfg, where: str, env=None) -> None:
    """`ValueError` naming both sides unless checkpoint `ckpt`'s env is `env_cfg`'s: the same env,
    kwargs and observation layout; with `env` (built), also the observation keys it was trained on
    (where its config says null, all of them) and the observation and action sizes. Evaluation
    and resume make it too: an env whose Dict observation gained or renamed a key since keeps the
    config, not the layout the policy reads."""
    from grpo_robot.environment import bounds_differ, check_identity, env_identity

    record = ckpt["policy"]
    their_env = _their_env(ckpt, where)
    if their_env:  # the same env, kwargs and observation layout; the sizes named, compared with `env`
        theirs = {**env_identity(their_env), "obs_dim": record["obs_dim"], "action_dim": record["action_dim"]}
        observed = ckpt.get("env_identity")  # the keys it was trained on, where its config says null (all)
        if isinstance(observed, dict) and observed.get("obs_keys") is not None and theirs.get("obs_keys") is None:
            theirs["obs_keys"] = list(observed["obs_keys"])
        check_identity(theirs, env_identity(env_cfg, env), where)
    if env is not None and (record["obs_dim"], record["action_dim"]) != (env.obs_dim, env.action_dim):
        raise ValueError(
            f"{where} has obs_dim={record['obs_dim']}, action_dim={record['action_dim']}, but {env.name} has "
            f"obs_dim={env.obs_dim}, action_dim={env.action_dim}"
        )
    observed = ckpt.get("env_identity")
    differ = None if env is None or not isinstance(observed, dict) else bounds_differ(observed, env)
    if differ:  # its [-1, 1] actions would mean other ones
        raise ValueError(f"{where} was trained on {differ}; give the env the bounds it had (env.kwargs)")


def _their_env(ckpt: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The env config a checkpoint was trained with, if it records one."""
    config = ckpt.get("config")
    their_env = config.get("env") if isinstance(config, dict) else None
    if their_env and not isinstance(their_env, dict):
        raise CheckpointError(f"{where}: its config's env is a {type(their_env).__name__}, not an env config")
    return their_env or None


def _check_policy_type(record: dict[str, Any], cfg, where: str) -> None:
    if record["type"] != cfg.policy.type:
        raise CheckpointError(f"{where} holds a {record['type']} policy, but the config has "
                              f"policy.type={cfg.policy.type}")  # fmt: skip


def _check_architecture(record: dict[str, Any], cfg, where: str) -> None:
    from grpo_robot.config import policy_kwargs

    mine, theirs = policy_kwargs(cfg.policy, cfg.env), _full_kwargs(record["type"], record["kwargs"])
    if isinstance(theirs, dict) and bool(theirs.get("mirror")) != bool(mine.get("mirror")):
        # a mirrored policy's weights read the canonical frame's observations, another's the world's
        raise CheckpointError(f"{where} was trained with policy.mirror={str(bool(theirs.get('mirror'))).lower()}, "
                              f"but the config has policy.mirror={str(bool(mine.get('mirror'))).lower()}")  # fmt: skip
    for key in ARCHITECTURE_KEYS:
        if key == "embed_dim" and theirs.get("head") == mine.get("head") == "factorized":
            continue  # only the autoregressive head embeds tokens
        if key in mine and key in theirs and theirs[key] != mine[key]:
            raise CheckpointError(f"{where} has policy.{key}={theirs[key]!r}, but the config has "
                                  f"policy.{key}={mine[key]!r}")  # fmt: skip


def check_resumable(ckpt: dict[str, Any], policy: Policy, needs_reference: bool, needs_critic: bool) -> None:
    """`ValueError` (a one-line `CheckpointError` naming the file) unless checkpoint `ckpt` holds what
    resuming into `policy` needs: a training run's full state, not a behaviour-cloning checkpoint,
    the same policy, and an optimizer state that fits it."""
    path = getattr(ckpt, "path", None) or "the checkpoint"
    check(ckpt, path, "resume")
    record, mine = ckpt["policy"], policy_record(policy)
    # a subclass's own arguments on both sides; not `decode`, which only chooses the deterministic action
    # (a resumed run may evaluate otherwise: grpo_robot/resume.py)
    record = {**record, "kwargs": {k: v for k, v in _full_kwargs(record["type"], record["kwargs"]).items()
                                   if k != "decode"}}  # fmt: skip
    mine = {**mine, "kwargs": {k: v for k, v in _full_kwargs(mine["type"], mine["kwargs"]).items() if k != "decode"}}
    for key in ("type", "obs_dim", "action_dim", "kwargs"):
        if record[key] != mine[key]:
            raise CheckpointError(f"cannot resume from {path}: its policy {key}={record[key]!r}, the config gives "
                                  f"{mine[key]!r}")  # fmt: skip
    if needs_reference and ckpt.get("reference") is None:
        raise CheckpointError(f"cannot resume from {path} with algo.kl.beta > 0: it holds no reference policy")
    if needs_critic and ckpt.get("critic") is None:
        raise CheckpointError(f"cannot resume from {path} with a critic (algo.advantage=gae): it holds no value "
                              "function")  # fmt: skip
    _check_optimizer_fits(ckpt["optimizer"], optimizer_order(policy), needs_critic, path)


def optimizer_order(policy: Policy) -> list[torch.nn.Parameter]:
    """The policy's parameters in the order the update's optimizer holds them (its groups')."""
    return [p for _, params in policy.optimizer_groups() for p in params]


def _check_optimizer_fits(optimizer: dict[str, Any], params: list[torch.nn.Parameter], has_extra: bool,
                          path: Any) -> None:  # fmt: skip
    """The optimizer state covers the policy's parameters (first, in order; a critic's follow) with
    moments of their shapes."""
    ids = [i for group in optimizer["param_groups"] for i in group["params"]]
    if len(ids) < len(params) or (not has_extra and len(ids) != len(params)):
        raise CheckpointError(f"{path}: its optimizer state covers {len(ids)} parameters; the policy has "
                              f"{len(params)}{' plus a critic' if has_extra else ''}")  # fmt: skip
    for i, param in zip(ids, params, strict=False):
        state = optimizer["state"].get(i, {})
        if not isinstance(state, dict):
            raise CheckpointError(f"{path}: its optimizer state for parameter {i} is not a dict")
        for name, value in state.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != param.shape:
                raise CheckpointError(f"{path}: its optimizer's {name} for parameter {i} is {list(value.shape)}, the "
                                      f"policy's is {list(param.shape)}")  # fmt: skip
