"""The policy interface and the pieces every policy shares."""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from grpo_robot.registry import ACTIVATIONS, POLICIES
from grpo_robot.symmetry import axes_problem, is_plain_flip, key_center, reflection


class _SigmoidTanh(torch.autograd.Function):
    """tanh(x) as 2 sigmoid(2x) - 1, with tanh's own backward, 1 - y^2, from the saved output.
    On AMD CPUs torch's float32 tanh (MKL's vector math) is several times as slow as its sigmoid;
    this form is within 2e-7 of it (absolute) and made the default job's update 13-17% shorter
    there (docs/benchmarks.md)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


class SigmoidTanh(nn.Module):
    """tanh as 2 sigmoid(2x) - 1 for float32 on the CPU, torch.tanh elsewhere (one fused kernel on
    a GPU): `policy.activation=sigmoid_tanh`, and `tanh` on AMD CPUs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu" or x.dtype != torch.float32:
            return torch.tanh(x)
        if torch.is_grad_enabled() and x.requires_grad:
            return _SigmoidTanh.apply(x)
        return torch.sigmoid(x * 2.0).mul_(2.0).sub_(1.0)  # _SigmoidTanh.forward, without autograd's bookkeeping


def sigmoid_form_is_faster(vendor: str | None = None) -> bool:
    """Whether the sigmoid form beats torch.tanh on this CPU (`vendor`: its vendor id, by default
    this machine's). It does on AMD's, where MKL's vector tanh takes a slow path (88 us against
    14 us for a [256, 128] tanh); on Intel's torch.tanh is 4-5x as fast as the form (9 against
    48 us for [64, 128], 1.5 against 7.5 ms for [16384, 128]), and elsewhere torch's own kernel
    serves (docs/benchmarks.md, "The hidden layers' tanh on the CPU")."""
    from grpo_robot.machine import cpu_vendor

    return (vendor or cpu_vendor()) == "AuthenticAMD"


class Tanh(SigmoidTanh):
    """The hidden layers' tanh (`policy.activation=tanh`, the default): of the two computations of
    one function, the faster on this kind of CPU, chosen once per process by its vendor
    (`sigmoid_form_is_faster`), so that a machine's runs repeat to the bit. They differ by at most
    2e-7; `sigmoid_tanh` or `torch_tanh` fixes one on every machine."""

    sigmoid_form = sigmoid_form_is_faster()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) if self.sigmoid_form else torch.tanh(x)


# torch_tanh: torch.tanh on every device, as "tanh" computed before the sigmoid form (its results to
# the bit); sigmoid_tanh: the sigmoid form on every CPU, as "tanh" computes on AMD CPUs
for _name, _module in {
    "tanh": Tanh, "sigmoid_tanh": SigmoidTanh, "torch_tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU,
    "gelu": nn.GELU,
}.items():
    ACTIVATIONS.file(_name, _module)
del _name, _module


def mlp(sizes: list[int], activation: str, out_scale: float = 1.0) -> nn.Sequential:
    """Linear layers of `sizes[0] -> ... -> sizes[-1]`, `activation` between them (not after the
    last). Orthogonal init; the last layer is scaled by `out_scale` so initial outputs are small."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        linear = nn.Linear(n_in, n_out)
        last = i == len(sizes) - 2
        nn.init.orthogonal_(linear.weight, gain=out_scale if last else 2**0.5)
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class ObsNormalizer(nn.Module):
    """Running mean and variance of observations, part of the policy's state_dict so a checkpoint
    carries it. `update` is called between iterations, never inside an update, so the old and new
    log-probs of one iteration see the same normalization."""

    def __init__(self, obs_dim: int, enabled: bool = True, clip: float = 10.0) -> None:
        super().__init__()
        self.enabled, self.clip = enabled, clip
        self.register_buffer("mean", torch.zeros(obs_dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(obs_dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        # (mean, var, (their versions, dtype), (mean, sqrt(var + 1e-8)) in that dtype): the statistics
        # change only between iterations, the forward runs at every control step
        self._cast: tuple | None = None

    @torch.no_grad()
    def update(self, obs: torch.Tensor) -> None:
        """Merge a batch `obs: [S, obs_dim]` into the running moments (parallel-variance rule)."""
        if not self.enabled or len(obs) == 0:
            return
        obs = obs.to(torch.float64)
        n = obs.shape[0]
        mean, var = obs.mean(0), obs.var(0, unbiased=False)
        total = self.count + n
        delta = mean - self.mean
        self.var.copy_((self.var * self.count + var * n + delta**2 * self.count * n / total) / total)
        self.mean.add_(delta * n / total)
        self.count.copy_(total)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return obs
        mean, scale = self._statistics(obs.dtype)
        return ((obs - mean) / scale).clamp(-self.clip, self.clip)

    def clear_cache(self) -> None:
        """Forget the statistics cast for the forward pass (they are cast again at the next call)."""
        self._cast = None

    def _statistics(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, sqrt(var + 1e-8)) in `dtype`, computed again only when a buffer was replaced
        (moved, cast) or changed in place (`update`, `load_state_dict`: tensor versions)."""
        mean, var, cast = self.mean, self.var, self._cast
        stamp = (mean._version, var._version, dtype)
        if cast is None or cast[0] is not mean or cast[1] is not var or cast[2] != stamp:
            with torch.no_grad():
                cast = (mean, var, stamp, (mean.to(dtype), torch.sqrt(var.to(dtype) + 1e-8)))
            self._cast = cast
        return cast[3]


class Frame(NamedTuple):
    """How each row's action goes from the policy's canonical frame back to the world's:
    `world[..., i] = sign[..., i] * canonical[..., perm[..., i]]` (`perm` None: no axis swaps
    actions, and the map is the sign alone)."""

    sign: torch.Tensor  # [..., action_dim], +-1
    perm: torch.Tensor | None = None  # [..., action_dim] long

    def to_world(self, action: torch.Tensor) -> torch.Tensor:
        """Canonical actions (or means) `[..., action_dim]` in the world's frame."""
        return self.order(action) * self.sign

    def order(self, values: torch.Tensor) -> torch.Tensor:
        """Per-dimension values `[..., action_dim]` that no reflection negates (a std, a width) in
        the world's order of dimensions."""
        return values if self.perm is None else values.gather(-1, self.perm)


class Mirror(nn.Module):
    """A task's mirror symmetries, to act in one canonical frame (`policy.mirror`).

    Each axis is a reflection of the world under which the task is unchanged (envs/task.py,
    `Task.mirror_axes`, or grpo_robot/symmetry.py for the general form): it negates the
    observation entries `obs` and the action entries `action`, and may exchange pairs of entries
    (`swap`, `swap_action`: a left and a right finger) and reflect about a plane off the origin
    (`center`). Its `key`, one observation entry or the difference of two, picks the frame:
    where the key is negative the policy sees the observation reflected, so that the key reads
    positive, and its action is reflected back. A policy that learns to push a cube towards +x
    and +y then pushes it every way; each state is the image of one in the canonical quadrant,
    whose learning it shares. The frame is chosen at every step from the observation alone, so
    the policy stays a function of it (export, evaluation and Ray workers see nothing new), and
    reflections are signed permutations, of determinant +-1, so the log-probs of an action and
    of its image are equal."""

    def __init__(self, obs_dim: int, action_dim: int, axes: list[dict[str, Any]]) -> None:
        super().__init__()
        problem = axes_problem(axes, obs_dim, action_dim)  # first: what follows reads the axes as well formed
        if problem is not None:
            where, value, allowed = problem
            raise ValueError(f"mirror axes{where}={value!r} is invalid: {allowed}")
        # key = obs @ key_map - key_offset: +1 at an axis's key entry, -1 at its reference entry
        key_map = torch.zeros(obs_dim, len(axes))
        flips = torch.zeros(len(axes), obs_dim + action_dim)  # the entries each axis negates
        for i, axis in enumerate(axes):
            key_map[axis["key"][0], i] += 1.0
            if len(axis["key"]) == 2:
                key_map[axis["key"][1], i] -= 1.0
            flips[i, axis["obs"]] = 1.0
            flips[i, [obs_dim + j for j in axis["action"]]] = 1.0
        self.obs_dim = obs_dim
        # an entry that two reflected axes negate keeps its sign: counted mod 2, where axes share entries
        self.shared = bool((flips.sum(0) > 1).any())
        # only sign flips about planes through the origin (the built-in tasks): two small matmuls
        # (`signs`); else each reflected axis's signed permutation and offset in turn (`frame`)
        self.plain = all(is_plain_flip(axis) for axis in axes)
        self.swaps_actions = any(axis.get("swap_action") for axis in axes)
        # not in the state_dict: the axes are constructor arguments, kept with the policy's kwargs
        self.register_buffer("key_map", key_map, persistent=False)
        self.register_buffer("flips", flips, persistent=False)
        obs_maps = [reflection(axis, obs_dim) for axis in axes]
        action_maps = [reflection(axis, action_dim, actions=True) for axis in axes]
        for name, maps, part in (("obs_perm", obs_maps, 0), ("obs_sign", obs_maps, 1), ("obs_offset", obs_maps, 2),
                                 ("action_perm", action_maps, 0), ("action_sign", action_maps, 1)):  # fmt: skip
            values = torch.as_tensor(np.stack([m[part] for m in maps]))
            self.register_buffer(name, values if part == 0 else values.float(), persistent=False)
        offsets = torch.tensor([key_center(axis, obs_dim) for axis in axes])
        self.register_buffer("key_offset", offsets, persistent=False)

    def signs(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(observation signs `[..., obs_dim]`, action signs `[..., action_dim]`), each +-1, of axes
        that only negate entries (`plain`): an entry is negated when an odd number of the axes it
        belongs to are reflected. Two small matmuls: it runs at every control step and in every
        minibatch."""
        reflected = (obs @ self.key_map.to(obs.dtype) < 0).to(obs.dtype)  # [..., axes]
        odd = reflected @ self.flips.to(obs.dtype)
        if self.shared:
            odd = torch.remainder(odd, 2.0)
        sign = 1.0 - 2.0 * odd
        return sign[..., : self.obs_dim], sign[..., self.obs_dim :]

    def frame(self, obs: torch.Tensor) -> tuple[torch.Tensor, Frame]:
        """(the observations `[..., obs_dim]` in the canonical frame, the `Frame` that takes the
        policy's actions back to the world's)."""
        if self.plain:
            obs_sign, action_sign = self.signs(obs)
            return obs * obs_sign, Frame(action_sign)
        reflected = (obs @ self.key_map.to(obs.dtype) - self.key_offset.to(obs.dtype) < 0)[..., None]  # [..., axes, 1]
        batch = obs.shape[:-1]
        perm = torch.arange(self.action_sign.shape[1], device=obs.device).expand(*batch, -1)
        sign = torch.ones(*batch, self.action_sign.shape[1], dtype=obs.dtype, device=obs.device)
        for a in range(self.key_map.shape[1]):  # the axes commute (symmetry.axes_problem): in any order
            image = obs.gather(-1, self.obs_perm[a].expand_as(obs)) * self.obs_sign[a].to(obs.dtype)
            obs = torch.where(reflected[..., a, :], image + self.obs_offset[a].to(obs.dtype), obs)
            # the world's action is this axis's reflection of the map so far: x -> s_a * x[p_a]
            step = self.action_perm[a].expand_as(perm)
            perm = torch.where(reflected[..., a, :], perm.gather(-1, step), perm)
            sign = torch.where(reflected[..., a, :], sign.gather(-1, step) * self.action_sign[a].to(obs.dtype), sign)
        return obs, Frame(sign, perm if self.swaps_actions else None)


class Policy(nn.Module):
    """Interface. Shapes: `obs: [..., obs_dim]`, raw actions `[..., raw_dim]`, per-token
    log-probs and entropies `[..., n_tokens]`.

    A *token* is the unit of a policy's factorization: one action dimension (a Gaussian's
    diagonal factorizes over dimensions; a tokenized policy emits one bin index per dimension).
    The log-prob of an action is the sum over its tokens.
    """

    type: str  # the config's `policy.type`

    def __new__(cls, *args: Any, **kwargs: Any) -> Policy:
        self = super().__new__(cls)
        self.__dict__["_built_with"] = (args, kwargs)  # the outermost constructor's call, for init_kwargs
        return self

    def __init__(self, obs_dim: int, action_dim: int, obs_norm: bool,
                 mirror: list[dict[str, Any]] | None = None) -> None:  # fmt: skip
        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.n_tokens = action_dim
        self.obs_norm = ObsNormalizer(obs_dim, obs_norm)
        self.mirror = Mirror(obs_dim, action_dim, mirror) if mirror else None

    def canonical(self, obs: torch.Tensor) -> tuple[torch.Tensor, Frame | None]:
        """(the observations in the policy's canonical frame, the `Frame` that takes its actions
        back to the world's; None without `mirror`, where the frame is the world's). Observation
        normalization runs on the canonical observations (`inputs`)."""
        if self.mirror is None:
            return obs, None
        return self.mirror.frame(obs)

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """What the networks read: the canonical observations, normalized."""
        return self.obs_norm(self.canonical(obs)[0])

    def update_inputs(self, obs: torch.Tensor) -> None:
        """Merge observations `[S, obs_dim]` into the normalizer's statistics, in the canonical frame."""
        self.obs_norm.update(self.canonical(obs)[0])

    def init_kwargs(self) -> dict[str, Any]:
        """Constructor arguments but `obs_dim` and `action_dim`, stored in checkpoints to rebuild the
        policy: the arguments its class's constructor was called with (its defaults included, and
        what it took through `**kwargs`), over a built-in policy's `_kwargs`. So a registered
        subclass with an argument of its own (`width=2`) is rebuilt as it was by `evaluate.py`,
        `resume=` and Ray workers, and one that derives a parent's argument from its own (wider
        `hidden_sizes`) is called again with what it was given, not with what it derived."""
        kwargs = dict(getattr(self, "_kwargs", {}))
        args, given = self.__dict__.get("_built_with", ((), {}))
        signature = inspect.signature(type(self).__init__)
        try:
            bound = signature.bind(self, *args, **given)
        except TypeError:  # made without its constructor's arguments (an object __new__ made bare): what it keeps
            return kwargs
        bound.apply_defaults()
        called: dict[str, Any] = {}
        for name, value in list(bound.arguments.items())[1:]:
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                called.update(value)
            elif kind is not inspect.Parameter.VAR_POSITIONAL and name not in ("obs_dim", "action_dim"):
                called[name] = list(value) if isinstance(value, tuple) else value
        return {**kwargs, **called}

    def sample(self, obs: torch.Tensor, generator: torch.Generator | None = None, deterministic: bool = False):
        """-> (raw [..., raw_dim], action [..., action_dim] in [-1, 1], token log-probs [..., n_tokens])."""
        raise NotImplementedError

    def log_probs(self, obs: torch.Tensor, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-token log-probs of `raw` and per-token entropy estimates, both `[..., n_tokens]`."""
        raise NotImplementedError

    def state_free_entropy(self, rows: int) -> torch.Tensor | None:
        """The per-token entropy `[rows, n_tokens]` that `log_probs` returns, where it depends on
        no observation (a Gaussian with a free std, unsquashed), computed without a forward pass;
        None where it does. The update then scores a zero-advantage step's entropy bonus from it
        alone (grpo_robot/update.py). None by default."""
        return None

    def raw_from_action(self, action: torch.Tensor) -> torch.Tensor:
        """A raw action that executes as (close to) `action [..., action_dim]` in [-1, 1]: the
        target that behaviour cloning scores with `log_probs`."""
        raise NotImplementedError

    def std_parameters(self) -> list[nn.Parameter]:
        """Parameters that only set the exploration noise (kept fixed by BC unless asked)."""
        return []

    def optimizer_groups(self) -> list[tuple[float, list[nn.Parameter]]]:
        """The RL update's optimizer groups, (scale, parameters): each group trains at scale x
        algo.lr. They cover every parameter once, and the first one's scale is 1. Their order is
        the optimizer state's order, which resuming checks. Default: one group of them all."""
        return [(1.0, list(self.parameters()))]

    def after_step(self) -> None:
        """Called after every optimizer step that was kept: project parameters back onto their
        allowed set (e.g. the Gaussian's std bound). Nothing by default."""


def build_policy(policy_type: str, obs_dim: int, action_dim: int, **kwargs: Any) -> Policy:
    """A policy of `policy_type` (one of `POLICIES`)."""
    if policy_type not in POLICIES:
        raise ValueError(f"unknown policy type {policy_type!r}; known: {', '.join(POLICIES)}")
    return POLICIES[policy_type](obs_dim, action_dim, **kwargs)


def register_policy(cls: type[Policy]) -> type[Policy]:
    """File a policy class under its `type`, the name `policy.type` takes (grpo_robot/registry.py)."""
    POLICIES.file(cls.type, cls)
    return cls
