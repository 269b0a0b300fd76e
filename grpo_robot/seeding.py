"""Every seed range and random stream of the project, and the checks on them.

Reset seeds come from three disjoint ranges (training, evaluation, demonstrations; declared in
grpo_robot/seed_ranges.py and re-exported here), so evaluation never starts from a state seen in
training or in the demonstrations.

Random streams (sampling noise, minibatch shuffles, evaluation noise, replayed starts) are
functions of (run seed, iteration, stream[, sampling round]) only, so a resumed run draws exactly
what an uninterrupted one would.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

import numpy as np
import torch

from grpo_robot.seed_ranges import (  # noqa: F401  (the ranges, here with the rest of the seeding)
    DEMO_RUNS,
    DEMO_SEED_START,
    DEMO_SEEDS_PER_RUN,
    EVAL_SEED_END,
    EVAL_SEED_START,
    EVAL_SPLITS,
    TEST_SEED_START,
    TRAIN_SEED_END,
    check_seeds,
)

STREAM_ROLLOUT, STREAM_SHUFFLE, STREAM_EVAL = 1, 2, 3
STREAM_REPLAY = 77  # algo.start_replay's draw of buffered seeds: numpy key [run seed, iteration, 77(, round)]


def iteration_seeds(run_seed: int, iteration: int, n_groups: int, round_: int = 0) -> np.ndarray:
    """`[G]` training group seeds of one iteration (and dynamic-sampling round)."""
    key = [run_seed, iteration] if round_ == 0 else [run_seed, iteration, 0, round_]
    return np.random.default_rng(key).integers(0, TRAIN_SEED_END, n_groups)


def group_seeds(seeds: Sequence[int], group_size: int) -> np.ndarray:
    """`[G]` group seeds -> `[G * group_size]` world seeds, members of a group adjacent, so
    per-world arrays reshape as `[G * N] -> [G, N]`."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    return np.repeat(np.asarray(seeds, dtype=np.int64), group_size)


def eval_seeds(n: int, split: str = "validation") -> np.ndarray:
    """Held-out evaluation seeds: the first `n` of the evaluation range's `validation` half (a
    run's own evaluations) or its `test` half (`scripts/evaluate.py`; grpo_robot/seed_ranges.py)."""
    start = {"validation": EVAL_SEED_START, "test": TEST_SEED_START}.get(split)
    if start is None:
        raise ValueError(f"split={split!r} is invalid: must be one of {', '.join(EVAL_SPLITS)}")
    size = TEST_SEED_START - EVAL_SEED_START
    if not 0 <= n <= size:
        raise ValueError(f"n={n} evaluation seeds is invalid: must be in [0, {size}]")
    return start + np.arange(n, dtype=np.int64)


def check_demo_seed(seed: int, key: str = "seed") -> None:
    if not 0 <= seed < DEMO_RUNS:
        raise ValueError(f"{key}={seed} is invalid: must be in [0, {DEMO_RUNS})")


def demo_seeds(seed: int, start: int, n: int) -> np.ndarray:
    """`[n]` reset seeds of demo run `seed`, from its `start`-th episode on."""
    check_demo_seed(seed)
    if start < 0 or start + n > DEMO_SEEDS_PER_RUN:
        raise ValueError(f"demo episodes [{start}, {start + n}) exceed the {DEMO_SEEDS_PER_RUN} seeds of one demo run")
    return DEMO_SEED_START + seed * DEMO_SEEDS_PER_RUN + start + np.arange(n, dtype=np.int64)


def stream_seed(run_seed: int, iteration: int, stream: int, round_: int = 0) -> int:
    """A 62-bit seed for one random stream of one iteration, a function of its arguments only."""
    key = [run_seed, iteration, stream] if round_ == 0 else [run_seed, iteration, stream, round_]
    return int(np.random.default_rng(key).integers(2**62))


def iteration_generator(
    run_seed: int, iteration: int, device: torch.device | str, stream: int = STREAM_ROLLOUT, round_: int = 0
) -> torch.Generator:
    """A torch generator on `device` for one stream of one iteration (see `stream_seed`)."""
    return torch.Generator(device=device).manual_seed(stream_seed(run_seed, iteration, stream, round_))


class WorldRows:
    """The sampling noise of worlds `start:stop` of a batch of `total` worlds: each draw is made
    for all `total` worlds from `generator` (as one process running the whole batch draws it) and
    these rows are kept, so that a world's noise does not depend on how the batch is split across
    processes (rollout workers). Pass it where a policy's `sample` takes a generator."""

    def __init__(self, generator: torch.Generator | None, start: int, stop: int, total: int) -> None:
        if not 0 <= start < stop <= total:
            raise ValueError(f"rows {start}:{stop} of {total} worlds is not a slice of them")
        self.generator, self.start, self.stop, self.total = generator, start, stop, total

    def _draw(self, fn, shape: Sequence[int], **kwargs) -> torch.Tensor:
        if shape[0] != self.stop - self.start:
            raise ValueError(f"a draw for {shape[0]} worlds from rows {self.start}:{self.stop}")
        draw = normal if fn is torch.randn else uniform
        return draw(self.generator, (self.total, *shape[1:]), **kwargs)[self.start : self.stop]

    def randn(self, shape: Sequence[int], **kwargs) -> torch.Tensor:
        return self._draw(torch.randn, shape, **kwargs)

    def rand(self, shape: Sequence[int], **kwargs) -> torch.Tensor:
        return self._draw(torch.rand, shape, **kwargs)


class SeedStreams:
    """Sampling noise with a stream of its own per world, keyed by (`noise_seed`, the world's reset
    seed): a world's draws depend on its seed alone, not on the other worlds of the batch, their
    order, or the episodes drawn before. A sampled evaluation uses it, so that the episode of a
    seed is the same in an evaluation of 20 seeds or 2000, on any number of worlds, and can be
    played again by itself (video.film_evaluated). A world's k-th draw is its stream's k-th."""

    def __init__(self, noise_seed: int, world_seeds: Sequence[int], device: torch.device | str) -> None:
        self.generators = [torch.Generator(device=device).manual_seed(world_stream_seed(noise_seed, s))
                           for s in np.asarray(world_seeds).tolist()]  # fmt: skip

    def _draw(self, fn, shape: Sequence[int], **kwargs) -> torch.Tensor:
        if shape[0] != len(self.generators):
            raise ValueError(f"a draw for {shape[0]} worlds from the streams of {len(self.generators)}")
        return torch.stack([fn(tuple(shape[1:]), generator=g, **kwargs) for g in self.generators])

    def randn(self, shape: Sequence[int], **kwargs) -> torch.Tensor:
        return self._draw(torch.randn, shape, **kwargs)

    def rand(self, shape: Sequence[int], **kwargs) -> torch.Tensor:
        return self._draw(torch.rand, shape, **kwargs)


def world_stream_seed(noise_seed: int, world_seed: int) -> int:
    """A 62-bit seed for the stream of the world reset from `world_seed` (see `SeedStreams`)."""
    if not 0 <= noise_seed < 2**62 or not 0 <= world_seed < 2**32:
        raise ValueError(f"noise seed {noise_seed} or world seed {world_seed} out of [0, 2^62), [0, 2^32)")
    return int(np.random.default_rng([noise_seed & 0xFFFFFFFF, noise_seed >> 32, world_seed]).integers(2**62))


class CorrelatedDraws:
    """A stream whose draws are correlated in time, for exploration that keeps a direction for a
    while (`algo.noise_correlation`). The k-th standard-normal draw of a shape is
    `rho * previous + sqrt(1 - rho^2) * fresh`: each world's noise is an AR(1) sequence over the
    control steps (a sampled Ornstein-Uhlenbeck process), every single draw still N(0, 1), so a
    policy's per-step density is unchanged. Uniform draws are the normal CDF of such a sequence,
    uniform on [0, 1) with the same persistence (inverse-CDF token sampling). Draw k of every
    shape depends only on draws 0..k of that shape: use one per episode batch; wrap it in
    `WorldRows` or `SharedDraws` like a generator."""

    def __init__(self, generator: torch.Generator, rho: float) -> None:
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"rho must be in [0, 1), got {rho!r}")
        self.generator, self.rho = generator, rho
        self._last: dict[tuple, torch.Tensor] = {}  # (kind, shape, dtype, device) -> the last normal draw

    def _next(self, kind: str, shape: Sequence[int], kwargs: dict) -> torch.Tensor:
        fresh = torch.randn(tuple(shape), generator=self.generator, **kwargs)
        key = (kind, tuple(shape), fresh.dtype, fresh.device)
        last = self._last.get(key)
        z = fresh if last is None else self.rho * last + math.sqrt(1.0 - self.rho**2) * fresh
        self._last[key] = z
        return z

    def randn(self, shape: Sequence[int], **kwargs) -> torch.Tensor:
        return self._next("normal", shape, kwargs)

    def rand(self, shape: Sequence[int], **kwargs) -> torch.Tensor:
        z = self._next("uniform", shape, kwargs)
        below_one = 1.0 - torch.finfo(z.dtype).eps  # ndtr rounds to 1.0 past z = 8.3 (float64)
        return torch.special.ndtr(z).clamp_(max=below_one)


def exploration(generator: torch.Generator, noise_correlation: float) -> torch.Generator | CorrelatedDraws:
    """A rollout's noise source: `generator` itself, or its draws correlated in time."""
    return CorrelatedDraws(generator, noise_correlation) if noise_correlation > 0 else generator


class SharedDraws:
    """One stream's draws for `total` worlds, shared out by rows among parts of the batch that
    sample separately (the halves of a split rollout): a part's k-th draw is rows of the stream's
    k-th draw for all worlds, made when the first part asks for it. The parts thus see exactly
    the noise one call for all worlds would, in whatever order they interleave, as long as each
    part makes the same sequence of draws, and from parts sampling on threads of their own.
    `generator` may itself be a `WorldRows`."""

    def __init__(self, generator: torch.Generator | WorldRows, total: int) -> None:
        self.generator, self.total = generator, total
        self._draws: list[tuple[str, tuple, torch.Tensor]] = []
        self._lock = threading.Lock()  # one part makes draw k while the others wait for it

    def rows(self, start: int, stop: int) -> _SharedRows:
        """The draws of worlds `start:stop`, to pass where a policy's `sample` takes a generator."""
        if not 0 <= start < stop <= self.total:
            raise ValueError(f"rows {start}:{stop} of {self.total} worlds is not a slice of them")
        return _SharedRows(self, start, stop)

    def _draw(self, k: int, fn, shape: Sequence[int], kwargs: dict) -> torch.Tensor:
        """The stream's k-th draw for all worlds (made now if no part has asked for it yet)."""
        tail = tuple(shape[1:])
        with self._lock:
            if k == len(self._draws):
                full = (normal if fn is torch.randn else uniform)(self.generator, (self.total, *tail), **kwargs)
                self._draws.append((fn.__name__, tail, full))
            drawn_kind, drawn_tail, full = self._draws[k]
        if (drawn_kind, drawn_tail) != (fn.__name__, tail):
            raise ValueError(f"draw {k} was {drawn_kind}{drawn_tail} for one part and {fn.__name__}{tail} for another")
        return full


class _SharedRows(WorldRows):
    """Rows `start:stop` of a `SharedDraws`: its k-th draw is the source's k-th, made once."""

    def __init__(self, source: SharedDraws, start: int, stop: int) -> None:
        super().__init__(None, start, stop, source.total)
        self.source, self.count = source, 0

    def _draw(self, fn, shape: Sequence[int], **kwargs) -> torch.Tensor:
        if shape[0] != self.stop - self.start:
            raise ValueError(f"a draw for {shape[0]} worlds from rows {self.start}:{self.stop}")
        full = self.source._draw(self.count, fn, shape, kwargs)
        self.count += 1
        return full[self.start : self.stop]


class PaddedRows(WorldRows):
    """A source's draws for its `n` worlds, padded with zero rows to `rows`: the noise of a policy
    call padded to more rows than it has worlds (`rollout.RowPadded`), the real rows first."""

    def __init__(self, source: NoiseSource, n: int, rows: int) -> None:
        super().__init__(None, 0, rows, rows)
        self.source, self.n = source, n

    def _draw(self, fn, shape: Sequence[int], **kwargs) -> torch.Tensor:
        if shape[0] != self.stop:
            raise ValueError(f"a draw for {shape[0]} rows from a source padded to {self.stop}")
        real = (normal if fn is torch.randn else uniform)(self.source, (self.n, *shape[1:]), **kwargs)
        return torch.cat([real, real.new_zeros((self.stop - self.n, *real.shape[1:]))])


# what a policy's `sample` takes as its noise
NoiseSource = torch.Generator | WorldRows | CorrelatedDraws | SeedStreams | None
_DRAWS = (WorldRows, CorrelatedDraws, SeedStreams)  # sources that draw by themselves


def normal(generator: NoiseSource, shape: Sequence[int], **kwargs) -> torch.Tensor:
    """Standard normal draws of `shape` (`[worlds, ...]`) from a generator or another `NoiseSource`."""
    if isinstance(generator, _DRAWS):
        return generator.randn(shape, **kwargs)
    return torch.randn(tuple(shape), generator=generator, **kwargs)


def uniform(generator: NoiseSource, shape: Sequence[int], **kwargs) -> torch.Tensor:
    """Uniform [0, 1) draws of `shape` (`[worlds, ...]`) from a generator or another `NoiseSource`."""
    if isinstance(generator, _DRAWS):
        return generator.rand(shape, **kwargs)
    return torch.rand(tuple(shape), generator=generator, **kwargs)


def correlated(generator: NoiseSource) -> bool:
    """Whether `generator`'s draws are correlated in time (a `CorrelatedDraws`, or rows of one)."""
    while True:
        if isinstance(generator, CorrelatedDraws):
            return True
        if isinstance(generator, _SharedRows):
            generator = generator.source.generator
        elif isinstance(generator, PaddedRows):
            generator = generator.source
        elif isinstance(generator, WorldRows):
            generator = generator.generator
        else:
            return False


def uniform_columns(generator: NoiseSource, shape: Sequence[int], **kwargs) -> torch.Tensor:
    """Uniform draws of `shape` (`[worlds, ..., n, 1]`) for n choices made one after another in
    one control step (an autoregressive decode). A source correlated in time gives them in one
    draw, so that choice i of a step continues choice i of the step before (n draws of one
    shape would chain the step's choices to each other instead); any other source gives n draws
    of `[worlds, ..., 1, 1]` in turn, as a decode that draws as it goes would."""
    shape = tuple(shape)
    if correlated(generator):
        return uniform(generator, shape, **kwargs)
    one = (*shape[:-2], 1, shape[-1])
    return torch.cat([uniform(generator, one, **kwargs) for _ in range(shape[-2])], dim=-2)
