"""Videos of episodes: run a policy while rendering the worlds, label the frames (env, seed, step,
outcome), and write them as MP4 (and GIF) with imageio.

Which episodes: evaluation knows every held-out seed's outcome, so `pick_seeds` takes successes
and failures alike (failures first when there is an odd one out: they are what a user needs to
see), and `record` plays those seeds again. With deterministic actions a replay is the same
episode; its recorded outcome is what the label and the file name say in any case.

Rendering never touches the training env or the run's random streams: the video env is a
separate env of a few worlds, and the built-in tasks render from a copy of each world's state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from grpo_robot.checkpoint import write_bytes_atomic
from grpo_robot.config import EnvConfig, RenderConfig, TrainConfig, file_stem
from grpo_robot.environment import GroupEnv, make_env
from grpo_robot.evaluation import EvalResult
from grpo_robot.policies import Policy
from grpo_robot.seeding import NoiseSource, SeedStreams

VIDEO_EXTRA = "pip install 'grpo-robot[video]' (imageio and imageio-ffmpeg)"


@dataclass
class Episode:
    env: str
    seed: int
    frames: np.ndarray  # [steps + 1, H, W, 3] uint8: the start, then the state after each step
    success: bool
    failed: bool  # the world crashed or blew up
    horizon: int

    @property
    def steps(self) -> int:
        return len(self.frames) - 1

    @property
    def outcome(self) -> str:
        return "success" if self.success else "failure"

    def caption(self) -> str:
        if self.success:
            return f"success at step {self.steps}"
        if self.failed:
            return f"failure: the world failed at step {self.steps}"
        return f"failure: no success in {self.steps} steps"

    def labelled(self) -> np.ndarray:
        """The frames with the env, seed, step and outcome drawn on them."""
        from grpo_robot.render import label

        steps = [f"step {t}/{self.horizon}" for t in range(len(self.frames))]
        return label(self.frames, f"{self.env}  seed {self.seed}", steps, self.caption(), self.success)


@dataclass
class Clip:
    """What the loggers get of one filmed evaluation: the labelled episodes tiled into one clip,
    and the files written."""

    tag: str
    frames: np.ndarray  # [T, H, W, 3] uint8
    fps: float
    files: list[Path]

    def small(self, max_width: int = 640, max_frames: int = 50) -> tuple[np.ndarray, float]:
        """The clip for a log file: halved until at most `max_width` wide, every k-th frame so
        that at most `max_frames` remain; -> (frames, fps that keeps real time)."""
        frames = self.frames
        while frames.shape[2] > max_width:
            frames = frames[:, ::2, ::2]
        stride = max(-(-len(frames) // max_frames), gif_stride(self.fps))  # TensorBoard stores a GIF too
        return np.ascontiguousarray(frames[::stride]), self.fps / stride



def check_imageio() -> None:
    """`ValueError` (one line) when the video extra is missing."""
    try:
        import imageio  # noqa: F401
        import imageio_ffmpeg  # noqa: F401
    except ImportError as err:
        raise ValueError(f"video needs the package {err.name!r}: {VIDEO_EXTRA}") from None


def render_env_config(env: EnvConfig) -> EnvConfig:
    """The env config of a video env: a Gymnasium env is made with `render_mode="rgb_array"`."""
    if env.task:
        return env
    return replace(env, kwargs={**env.kwargs, "render_mode": "rgb_array"}, check_seeding=False)


GYM_WORLDS = 4  # Gymnasium envs built at once to film (each world is its own env)


def make_video_env(cfg: TrainConfig, episodes: int) -> GroupEnv:
    """Worlds of the run's env that can render, to film `episodes` at a time (at most
    `GYM_WORLDS` of a Gymnasium env). Chooses the OpenGL platform first (`RenderError` when none
    works), since robosuite fixes it when first imported. A Gymnasium env renders one frame here,
    so that one whose `render()` gives no RGB frame is a one-line `ValueError` before any filming."""
    from grpo_robot.gym_vector import EnvFailure
    from grpo_robot.render import gl_backend
    from grpo_robot.seeding import eval_seeds

    gl_backend()
    env = make_env(render_env_config(cfg.env), episodes if cfg.env.task else min(episodes, GYM_WORLDS))
    if not cfg.env.task:
        try:
            env.reset(np.repeat(eval_seeds(1), env.num_worlds))
            env.render([0])
        except EnvFailure as err:
            env.close()
            raise ValueError(f"video: {err}") from None
    return env


def pick_seeds(result: EvalResult, n: int, outcomes: str = "both") -> np.ndarray:
    """Up to `n` evaluated seeds, each kind in evaluation order. `both`: half successes and half
    failures when both occurred (failures take the odd one, and any share the other kind cannot
    fill); `successes` or `failures`: only that kind (fewer than `n` when fewer occurred)."""
    wins, losses = result.seeds[result.success], result.seeds[~result.success]
    if outcomes == "successes":
        return wins[:n].astype(np.int64)
    if outcomes == "failures":
        return losses[:n].astype(np.int64)
    n_loss = min(len(losses), n - min(len(wins), n // 2))
    n_win = min(len(wins), n - n_loss)
    return np.concatenate([losses[:n_loss], wins[:n_win]]).astype(np.int64)


@torch.no_grad()
def record(
    env: GroupEnv,
    policy: Policy,
    seeds: Sequence[int],
    device: torch.device,
    camera: str = "front",
    width: int = 320,
    height: int = 240,
    deterministic: bool = True,
    generator: NoiseSource = None,
    final_step_outcome: bool = False,
) -> list[Episode]:
    """One episode per seed, `env.num_worlds` at a time, rendering every world at the start and
    after each of its steps."""
    seeds = np.asarray(seeds, dtype=np.int64)
    was_training = policy.training
    policy.eval()
    episodes: list[Episode] = []
    try:
        for start in range(0, len(seeds), env.num_worlds):
            chunk = seeds[start : start + env.num_worlds]
            padded = np.concatenate([chunk, np.repeat(chunk[-1:], env.num_worlds - len(chunk))])
            obs = env.reset(padded)
            frames = [[f] for f in env.render(None, camera=camera, width=width, height=height)]
            while not env.done.all():
                running = np.flatnonzero(~env.done)
                _, action, _ = policy.sample(torch.as_tensor(obs, device=device), generator, deterministic)
                obs, *_ = env.step(action.cpu().numpy())
                for w, frame in zip(running, env.render(running, camera=camera, width=width, height=height),
                                    strict=True):  # fmt: skip
                    frames[w].append(frame)
            success = (env.success if final_step_outcome else env.terminated) & ~env.failed
            for w, seed in enumerate(chunk):
                episodes.append(Episode(env.name, int(seed), _readable(np.stack(frames[w]), width), bool(success[w]),
                                        bool(env.failed[w]), env.horizon))  # fmt: skip
    finally:
        policy.train(was_training)
    return episodes


SMALL_FRAME = 160  # an env's own frames narrower than this are enlarged: the labels need the room


def _readable(frames: np.ndarray, asked_width: int) -> np.ndarray:
    """Frames `[T, H, W, 3]` of an env that renders at its own size (a Gymnasium env's render(),
    not the `asked_width` of the built-in scene): under `SMALL_FRAME` pixels wide, enlarged by a
    whole factor to at least twice that, pixels repeated, so that the labels fit and read."""
    width = frames.shape[2]
    if width == asked_width or width >= SMALL_FRAME:
        return frames
    scale = -(-2 * SMALL_FRAME // width)
    return frames.repeat(scale, axis=1).repeat(scale, axis=2)


def film(env: GroupEnv, policy: Policy, seeds: Sequence[int], device: torch.device, render: RenderConfig,
         folder: Path, deterministic: bool = True, generator: torch.Generator | None = None,
         final_step_outcome: bool = False) -> tuple[list[Episode], list[Path], float]:  # fmt: skip
    """`record` the seeds as `render` says and `write` them to `folder` -> (episodes, files, fps)."""
    episodes = record(env, policy, seeds, device, render.camera, render.width, render.height, deterministic,
                      generator, final_step_outcome)  # fmt: skip
    fps = env_fps(env)
    return episodes, write(episodes, folder, fps, gif=render.gif), fps


# what a film of an env that ignores its seed (env.group_start=clone) shows
NEW_EPISODES = ("env.group_start=clone: the env ignores its seed, so each film is a new episode of the same "
                "policy, not the one evaluated, and its outcome is its own")


def film_evaluated(env: GroupEnv, policy: Policy, result: EvalResult, seeds: Sequence[int], device: torch.device,
                   render: RenderConfig, folder: Path, deterministic: bool = True,
                   final_step_outcome: bool = False) -> tuple[list[Episode], list[Path], float]:  # fmt: skip
    """`film` the evaluated `seeds` of `result` as they went in the evaluation. A deterministic
    policy plays them again by itself; a sampled evaluation's episodes are played with the noise
    each had there (its seed's own stream, `seeding.SeedStreams`), so that each film shows the
    episode, and the outcome, that was evaluated; except for an env that ignores its seed
    (`NEW_EPISODES`)."""
    if deterministic:
        return film(env, policy, seeds, device, render, folder, True, None, final_step_outcome)
    if result.noise_seed is None:
        raise ValueError("a sampled evaluation's episodes can be filmed only with the noise seed it recorded")
    seeds = np.asarray(seeds, dtype=np.int64)
    episodes: list[Episode] = []
    for start in range(0, len(seeds), env.num_worlds):
        part = seeds[start : start + env.num_worlds]
        padded = np.concatenate([part, np.repeat(part[-1:], env.num_worlds - len(part))])
        episodes += record(env, policy, part, device, render.camera, render.width, render.height,
                           False, SeedStreams(result.noise_seed, padded, device), final_step_outcome)  # fmt: skip
    fps = env_fps(env)
    return episodes, write(episodes, folder, fps, gif=render.gif), fps


# -- files ---------------------------------------------------------------------------------------
def mp4_bytes(frames: np.ndarray, fps: float) -> bytes:
    """H.264 in an MP4 container (yuv420p, plays in browsers); `frames [T, H, W, 3]` uint8 with
    even H and W."""
    import imageio.v3 as iio

    return iio.imwrite("<bytes>", frames, extension=".mp4", plugin="FFMPEG", fps=fps, codec="libx264",
                       quality=7, pixelformat="yuv420p", macro_block_size=2)  # fmt: skip


# browsers show a GIF frame delay under 20 ms (GIF counts hundredths) as 100 ms: faster clips play slow
GIF_MAX_FPS = 50.0


def gif_stride(fps: float) -> int:
    """Every k-th frame of an `fps` clip keeps a GIF at most `GIF_MAX_FPS` (a 125 Hz env's: k = 3)."""
    return max(1, math.ceil(fps / GIF_MAX_FPS - 1e-9))


def gif_bytes(frames: np.ndarray, fps: float, hold_last_s: float = 1.0) -> bytes:
    """An endlessly looping GIF that rests `hold_last_s` on its last frame."""
    import imageio.v3 as iio

    stride = gif_stride(fps)
    if stride > 1:  # every k-th frame (and the last), each shown k times as long: real time kept
        frames = np.concatenate([frames[:-1:stride], frames[-1:]])
    ms = 1000.0 * stride / fps
    durations = [ms] * (len(frames) - 1) + [ms + 1000.0 * hold_last_s]
    return iio.imwrite("<bytes>", frames, extension=".gif", plugin="pillow", duration=durations, loop=0)


def tile(episodes: Sequence[np.ndarray], columns: int | None = None) -> np.ndarray:
    """Several labelled episodes side by side in one clip `[T, rows * H, columns * W, 3]`; shorter
    ones hold their last frame."""
    n = len(episodes)
    columns = columns or int(np.ceil(np.sqrt(n)))
    rows = int(np.ceil(n / columns))
    length = max(len(e) for e in episodes)
    _, h, w, _ = episodes[0].shape
    out = np.zeros((length, rows * h, columns * w, 3), np.uint8)
    for k, frames in enumerate(episodes):
        r, c = divmod(k, columns)
        held = np.concatenate([frames, np.repeat(frames[-1:], length - len(frames), 0)])
        out[:, r * h : (r + 1) * h, c * w : (c + 1) * w] = held
    return out


def write(episodes: Sequence[Episode], folder: Path, fps: float, gif: bool = False) -> list[Path]:
    """Each episode as `<folder>/<env>_seed<seed>_<outcome>.mp4` (and `.gif`), written atomically;
    the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for episode in episodes:
        frames = episode.labelled()
        stem = f"{file_stem(episode.env)}_seed{episode.seed}_{episode.outcome}"
        path = folder / f"{stem}.mp4"
        write_bytes_atomic(path, mp4_bytes(frames, fps))
        paths.append(path)
        if gif:
            path = folder / f"{stem}.gif"
            write_bytes_atomic(path, gif_bytes(frames, fps))
            paths.append(path)
    return paths


def env_fps(env: GroupEnv) -> float:
    """Frames per second that play an episode in real time: the env's control rate (25 when the
    env does not say)."""
    fps = getattr(env, "render_fps", None)
    return float(fps) if fps else 25.0
