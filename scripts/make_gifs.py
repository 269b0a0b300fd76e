"""The README's GIFs: one held-out successful episode of each trained run, as `<out>/<env>.gif`
(a second run of the same env in one call: `<out>/<env>_<its run directory's name>.gif`).

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
from grpo_robot.config import to_train_config
from grpo_robot.environment import make_eval_env
from grpo_robot.evaluation import evaluate
from grpo_robot.seeding import eval_seeds


def _size(text: str) -> tuple[int, int]:
    """`WIDTHxHEIGHT` -> (width, height), even positive integers (argparse's one-line error otherwise)."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 and int(p) % 2 == 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT in even positive pixels, e.g. 240x180")
    return int(parts[0]), int(parts[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (or checkpoint files)")
    parser.add_argument("--out", type=Path, default=Path("docs/media"))
    parser.add_argument("--size", default="240x180", type=_size, help="WIDTHxHEIGHT in pixels, even")
    parser.add_argument("--camera", default="front")
    parser.add_argument("--seeds", type=int, default=20, help="held-out seeds to find a success among")
    args = parser.parse_args()
    width, height = args.size
    device = "cpu"
    loaded = []
    for run in args.runs:  # every checkpoint read before any GIF is made: a bad one is one line, first
        try:
            path = checkpoint.resolve(run / "checkpoints" / "best.pt" if (run / "checkpoints" / "best.pt").exists()
                                      else run)  # fmt: skip
            loaded.append((run, path, checkpoint.load(path, purpose="evaluate")))
        except (FileNotFoundError, ValueError) as err:
            parser.error(str(err))
    written: set[Path] = set()
    for run, path, ckpt in loaded:
        cfg = to_train_config(ckpt["config"])
        policy = checkpoint.policy_from_record(ckpt["policy"], device)
        env = make_eval_env(cfg, args.seeds)
        result = evaluate(env, policy, eval_seeds(args.seeds), device)
        env.close()
        seeds = video.pick_seeds(result, 1, "successes")
        if not len(seeds):
            print(f"{path}: no success among {args.seeds} held-out seeds; no GIF")
            continue
        film = video.make_video_env(cfg, 1)
        (episode,) = video.record(film, policy, seeds, device, args.camera, width, height)
        fps = video.env_fps(film)
        film.close()
        out = args.out / f"{episode.env.replace('/', '_')}.gif"
        if out in written:  # a second run of the same env in this call: its own name, not the first's file
            out = args.out / f"{episode.env.replace('/', '_')}_{run.resolve().name}.gif"
        written.add(out)
        write_bytes_atomic(out, video.gif_bytes(episode.labelled(), fps))
        print(f"{out}: seed {episode.seed}, {episode.caption()}, {out.stat().st_size / 1e3:.0f} kB ({path})")


if __name__ == "__main__":
    main()
