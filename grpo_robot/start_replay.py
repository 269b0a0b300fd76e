"""Replay of informative starts (`algo.start_replay`).

With a binary outcome only a group whose members both succeed and fail teaches anything: an
all-failure or all-success group has zero advantage everywhere. From a random policy nearly every
group fails for the first million env steps, and later the policy may solve part of the starts
while groups from the rest keep failing together. `StartReplay` keeps the training seeds whose
last group was mixed and starts a share of every iteration's groups from them again, so more of
each batch carries a learning signal. It is the binary-outcome form of prioritized level replay
(Jiang et al. 2021, arXiv:2010.03934), which replays the levels with the most to learn.

- A seed enters the buffer when its group is mixed (0 < success rate < 1), and leaves it when a
  later group from it is not, or after `max_replays` replays, so no start is trained on forever.
- Each iteration `min(len(buffer), int(fraction * groups_per_iter))` groups start from buffered
  seeds, drawn without replacement from a stream of (run seed, iteration[, round]); the rest are
  the iteration's fresh seeds, as without replay. Training seeds only: evaluation never sees them.
- The buffer is part of the checkpoint, so a resumed run replays what an uninterrupted one would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from grpo_robot.seeding import STREAM_REPLAY

if TYPE_CHECKING:
    from grpo_robot.config import AlgoConfig


class StartReplay:
    def __init__(self, fraction: float, max_replays: int) -> None:
        self.fraction, self.max_replays = fraction, max_replays
        self.starts: dict[int, list] = {}  # seed -> [its last group's success rate, times replayed]; oldest first
        self.replayed = 0  # groups of the last draw that started from the buffer

    def mix(self, fresh: np.ndarray, run_seed: int, iteration: int, round_: int = 0) -> np.ndarray:
        """`[G]` group seeds of one draw: buffered seeds first, then the first of `fresh`."""
        n = min(len(self.starts), int(self.fraction * len(fresh) + 1e-9))  # 0.29 x 100 = 28.999...: 29
        self.replayed = n
        if n == 0:
            return fresh
        key = [run_seed, iteration, STREAM_REPLAY] + ([round_] if round_ else [])
        pick = np.random.default_rng(key).choice(np.fromiter(self.starts, np.int64, len(self.starts)), n,
                                                 replace=False)  # fmt: skip
        return np.concatenate([pick, fresh[: len(fresh) - n]])

    def record(self, groups: np.ndarray, rates: np.ndarray) -> None:
        """The outcome of a draw: `groups [G]` seeds and their groups' success rates `[G]`."""
        for seed, rate in zip(np.asarray(groups).tolist(), np.asarray(rates).tolist(), strict=True):
            replays = self.starts[seed][1] + 1 if seed in self.starts else 0
            if 0.0 < rate < 1.0 and replays < self.max_replays:
                self.starts[seed] = [rate, replays]  # a seed already held keeps its place
            else:
                self.starts.pop(seed, None)

    def metrics(self, n_groups: int) -> dict[str, float]:
        return {"charts/replayed_groups": self.replayed / n_groups, "charts/replay_starts": float(len(self.starts))}

    def state_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.starts),
            "rates": [float(r) for r, _ in self.starts.values()],
            "replays": [int(k) for _, k in self.starts.values()],
        }

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore `state_dict()`; None (a checkpoint written without replay) empties the buffer."""
        state = state or {"seeds": [], "rates": [], "replays": []}
        self.starts = {int(s): [float(r), int(k)]
                       for s, r, k in zip(state["seeds"], state["rates"], state["replays"], strict=True)}  # fmt: skip


def start_replay(algo: AlgoConfig) -> StartReplay | None:
    """The replay `algo.start_replay` asks for; None when its fraction is 0 (off)."""
    cfg = algo.start_replay
    return StartReplay(cfg.fraction, cfg.max_replays) if cfg.fraction > 0 else None
