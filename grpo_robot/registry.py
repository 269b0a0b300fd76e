"""The config's named variants (objectives, policies, activations), declared apart from the code
that implements them, so that a config is checked without loading torch: a bad value on the
command line is reported in about a second, not after torch has loaded.

Each registry declares its built-in names and the module that implements them; that module
files its entries when imported (`Registry.file`), and so does a plugin that adds one. Asking
whether a name is known, or listing the names, loads nothing; reading an entry, or iterating
over the entries, loads the module first (tests/test_registry.py checks that each module files
exactly the names declared for it).
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from importlib import import_module
from typing import Any


class Registry(MutableMapping[str, Any]):
    """`name -> implementation` for one config field, with the built-in names known up front."""

    def __init__(self, module: str, builtin: tuple[str, ...]) -> None:
        self.module, self.builtin = module, builtin
        self._entries: dict[str, Any] = {}

    def names(self) -> tuple[str, ...]:
        """Every known name, built-in ones first, without loading anything."""
        return self.builtin + tuple(name for name in self._entries if name not in self.builtin)

    def file(self, name: str, entry: Any) -> None:
        """Register `entry` under `name`; a name filed twice raises."""
        if name in self._entries:
            raise ValueError(f"{name!r} is already registered")
        self._entries[name] = entry

    def _load(self) -> None:
        import_module(self.module)

    def __contains__(self, name: object) -> bool:
        return name in self.builtin or name in self._entries

    def __getitem__(self, name: str) -> Any:
        if name not in self._entries:
            self._load()
        return self._entries[name]

    def __setitem__(self, name: str, entry: Any) -> None:
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(self._entries)

    def __len__(self) -> int:
        self._load()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.module!r}, {self.names()!r})"


# grpo_robot/algo.py: the objective's parts (algo.advantage, algo.ratio, algo.aggregation,
# algo.kl.estimator, algo.policy_loss)
ADVANTAGE_ESTIMATORS = Registry("grpo_robot.algo", ("grpo", "dr_grpo", "rloo", "gae"))
KL_ESTIMATORS = Registry("grpo_robot.algo", ("k1", "k2", "k3"))
AGGREGATIONS = Registry("grpo_robot.algo", ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm"))
RATIO_LEVELS = Registry("grpo_robot.algo", ("action", "token", "sequence"))
POLICY_LOSSES = Registry("grpo_robot.algo", ("clipped",))
CRITIC_ADVANTAGES = ("gae",)  # the built-in estimators that learn from a critic's values


def needs_critic(advantage: str) -> bool:
    """Whether `algo.advantage` learns from a critic: for a built-in name, from the declaration
    above; for a plugin's, from its registered entry (an unknown name: False)."""
    if advantage in ADVANTAGE_ESTIMATORS.builtin:
        return advantage in CRITIC_ADVANTAGES
    return advantage in ADVANTAGE_ESTIMATORS and ADVANTAGE_ESTIMATORS[advantage].needs_critic


# grpo_robot/policies: policy.type and policy.activation
POLICIES = Registry("grpo_robot.policies", ("gaussian", "tokenized"))
ACTIVATIONS = Registry("grpo_robot.policies.base", ("tanh", "sigmoid_tanh", "torch_tanh", "relu", "elu", "gelu"))

# the tokenized policy's fixed choices (grpo_robot/policies/tokenized.py)
HEADS = ("factorized", "autoregressive")  # one categorical per dimension, or each given the tokens before it
BIN_LOGITS = ("free", "ordinal", "gaussian")  # how the head's outputs become each bin's logit
DECODES = ("mode", "median", "mean")  # the deterministic action: the argmax bin, or each dimension's median or mean


def import_plugins(names: list[str] | tuple[str, ...], key: str = "plugins") -> None:
    """Import each module of `names` (one in the working directory is found too, as `python -m`
    finds it), so that it files its entries here; a module that fails is a one-line `ValueError`
    naming it and `key`."""
    import os
    import sys

    if names and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    for name in names:
        try:
            import_module(name)
        except Exception as err:  # noqa: BLE001  (any error of the user's module: one line)
            raise ValueError(f"{key}={list(names)}: importing {name!r} failed: {type(err).__name__}: "
                             f"{str(err).splitlines()[0] if str(err) else ''}") from None  # fmt: skip
