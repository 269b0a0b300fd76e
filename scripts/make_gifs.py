"""The README's GIFs: one held-out successful episode of each trained run, as `<out>/<env>.gif`
(a later run of the same env in one call: `<out>/<env>_<its run directory's name>.gif`, then
`-2`, `-3`, ...).

    python scripts/make_gifs.py RUN_DIR [RUN_DIR ...] [--out docs/media] [--size 240x180]

Each run's best checkpoint is evaluated on `--seeds` held-out seeds (deterministic actions); the
first success is played again, filmed from the front camera and written as a looping GIF with
its env, seed, step and outcome on the frames. Needs the `video` extra and headless OpenGL.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import grpo_robot  # noqa: F401  (before torch: sets how long OpenMP threads spin)
from grpo_robot import checkpoint, video
from grpo_robot.checkpoint import write_bytes_atomic
from grpo_robot.config import env_name, file_stem, to_train_config
from grpo_robot.environment import make_eval_env
from grpo_robot.envs.scene import CAMERAS, OFFSCREEN
from grpo_robot.evaluation import evaluate
from grpo_robot.seeding import eval_seeds


def _size(text: str) -> tuple[int, int]:
    """`WIDTHxHEIGHT` -> (width, height), even positive integers within the scene's offscreen
    buffer (argparse's one-line error otherwise, before any evaluation)."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 and int(p) % 2 == 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT in even positive pixels, e.g. 240x180")
    width, height = int(parts[0]), int(parts[1])
    if width > OFFSCREEN[0] or height > OFFSCREEN[1]:
        raise argparse.ArgumentTypeError(f"{text!r} is larger than the scene's offscreen buffer, "
                                         f"{OFFSCREEN[0]}x{OFFSCREEN[1]}")  # fmt: skip
    return width, height


MAX_SEEDS = 10_000  # evaluated, in as many worlds as fit, before a GIF is made


def _seed_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number in [1, {MAX_SEEDS}] (held-out seeds "
                                         "evaluated to find a success)")  # fmt: skip
    return int(text)


def _gif_name(out: Path, env: str, run: Path, written: set[Path]) -> Path:
    """`<out>/<env>.gif`; a later run of the same env in this call: `<env>_<its run directory's
    name>.gif`, then `-2`, `-3`, ... (no GIF of this call replaces another)."""
    env = file_stem(env)
    path = out / f"{env}.gif"
    if path not in written:
        return path
    run = run.resolve()
    if run.is_file():  # a checkpoint: <run dir>/checkpoints/<name>.pt
        run = run.parent.parent if run.parent.name == "checkpoints" else run.parent
    path = out / f"{env}_{run.name}.gif"
    n = 2
    while path in written:
        path, n = out / f"{env}_{run.name}-{n}.gif", n + 1
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (or checkpoint files)")
    parser.add_argument("--out", type=Path, default=Path("docs/media"))
    parser.add_argument("--size", type=_size, help="WIDTHxHEIGHT in pixels, even (built-in tasks; default 240x180)")
    parser.add_argument("--camera", choices=CAMERAS, help="built-in tasks' camera (default front)")
    parser.add_argument("--seeds", type=_seed_count, default=20, help="held-out seeds to find a success among")
    args = parser.parse_args()
    width, height = args.size or (240, 180)
    device = "cpu"
    loaded = []
    for run in args.runs:  # every checkpoint read before any GIF is made: a bad one is one line, first
        try:
            path = checkpoint.resolve(run / "checkpoints" / "best.pt" if (run / "checkpoints" / "best.pt").exists()
                                      else run)  # fmt: skip
            loaded.append((run, path, checkpoint.load(path, purpose="evaluate")))
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
        env_cfg = to_train_config(loaded[-1][2]["config"]).env
        given = [f"--{key}" for key in ("size", "camera") if getattr(args, key) is not None]
        if given and not env_cfg.task:  # a Gymnasium env films with its own render(): they would do nothing
            parser.error(f"{' and '.join(given)} apply to the built-in tasks; {path} is of {env_name(env_cfg)}, "
                         "which films with its own render() (its camera and size are set through env.kwargs)")
    written: set[Path] = set()
    for run, path, ckpt in loaded:
        cfg = to_train_config(ckpt["config"])
        policy = checkpoint.policy_from_record(ckpt["policy"], device)
        final_step = cfg.env.outcome == "final_step"
        env = make_eval_env(cfg, args.seeds)
        result = evaluate(env, policy, eval_seeds(args.seeds), device, final_step_outcome=final_step)
        env.close()
        seeds = video.pick_seeds(result, 1, "successes")
        if not len(seeds):
            print(f"{path}: no success among {args.seeds} held-out seeds; no GIF")
            continue
        film = video.make_video_env(cfg, 1)
        (episode,) = video.record(film, policy, seeds, device, args.camera or "front", width, height,
                                  final_step_outcome=final_step)  # fmt: skip
        fps = video.env_fps(film)
        film.close()
        out = _gif_name(args.out, episode.env, run, written)
        written.add(out)
        write_bytes_atomic(out, video.gif_bytes(episode.labelled(), fps))
        print(f"{out}: seed {episode.seed}, {episode.caption()}, {out.stat().st_size / 1e3:.0f} kB ({path})")


if __name__ == "__main__":
    main()
