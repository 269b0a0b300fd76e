"""Everything around the training loop, as hooks: budgets, the exploration std's falling cap
(`algo.std_anneal`), the start curriculum (`algo.curriculum`), the evaluation schedule (with the
best checkpoint and target stopping), periodic checkpoints, the loggers (TensorBoard, Weights &
Biases) and the progress bar.

A hook subclasses `Hook` and overrides what it needs; `Trainer(..., hooks=[...])` (or the config's
`hooks: [module:Class, ...]`) adds it to the defaults (`default_hooks`: after the evaluation, before
the periodic checkpoint and the loggers), which run in list order:

    on_start(trainer)              once, before the first iteration (after the BC stage); setting
                                   `trainer.stop` ends the run before it
    should_stop(trainer, rec)      after each iteration, every hook first: True ends the run after it,
                                   so that every hook's after_iteration knows it is the last; the hook
                                   says why in `trainer.stopped` (summary.json's "stopped"; else its
                                   class name is written there)
    after_iteration(trainer, rec)  after each iteration
    on_log(trainer, scalars, step) every batch of scalars, x-axis = env steps
    on_video(trainer, clip, step)  every filmed evaluation (`video_every`): a `video.Clip`
    on_end(trainer, summary)       once, with the run's summary (before summary.json is written)
    close()                        always, last, also when training raised

A hook that carries state from one iteration to the next returns it from `state_dict()`; the
trainer writes it into every checkpoint (keyed by the hook's class name) and hands it back through
`load_state_dict` when the run resumes, so a resumed run goes on as an uninterrupted one would.
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grpo_robot.checkpoint import WriteError, one_line
from grpo_robot.config import ConfigError, TrainConfig, config_dict
from grpo_robot.evaluation import EvalResult

if TYPE_CHECKING:
    from grpo_robot.trainer import Trainer
    from grpo_robot.video import Clip

log = logging.getLogger(__name__)


@dataclass
class IterationRecord:
    """What one iteration hands the hooks."""

    iteration: int  # iterations done, this one included
    env_steps: int  # env steps simulated so far
    scalars: dict[str, float]  # metrics of this iteration; hooks may add theirs
    final: bool = False  # the run ends after this iteration: the last one, a hook's should_stop, the target
    evaluation: EvalResult | None = None  # set when this iteration was evaluated
    best: bool = False  # its evaluation is the best so far: `Checkpoints` writes best.pt, after the user's hooks


class Hook:
    def on_begin(self, trainer: Trainer) -> None:
        """Before any work of `run()` (the behaviour-cloning stage included): for what can refuse
        the run outright, such as a logger's service, so that it fails before work is spent."""

    def on_start(self, trainer: Trainer) -> None:
        pass

    def should_stop(self, trainer: Trainer, record: IterationRecord) -> bool:
        return False

    def after_iteration(self, trainer: Trainer, record: IterationRecord) -> None:
        pass

    def on_log(self, trainer: Trainer, scalars: dict[str, float], step: int) -> None:
        pass

    def on_video(self, trainer: Trainer, clip: Clip, step: int) -> None:
        pass

    def on_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        """Release what the hook holds (files, the console); runs even when training raised."""

    def state_dict(self) -> dict[str, Any] | None:
        """What a resumed run needs to go on as this one would; None: nothing."""
        return None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def policy_success(scalars: dict[str, float], default: float = 0.0) -> float:
    """An iteration's training success as a measure of its policy: over every group drawn. Under
    dynamic sampling `charts/train_success` covers the kept (mixed) groups only, which leave out
    the all-success and all-failure ones; `charts/drawn_success` is the success before filtering."""
    return float(scalars.get("charts/drawn_success", scalars.get("charts/train_success", default)))


def eval_scalars(result: EvalResult) -> dict[str, float]:
    low, high = result.interval
    return {"charts/eval_success": result.rate, "charts/eval_success_low": low, "charts/eval_success_high": high}


class Budget(Hook):
    """Ends the run after `time_limit_min` minutes or `max_env_steps` env steps."""

    def __init__(self, time_limit_min: float | None, max_env_steps: int | None) -> None:
        self.seconds = None if time_limit_min is None else 60 * time_limit_min
        self.max_env_steps = max_env_steps

    def on_start(self, trainer: Trainer) -> None:
        """A budget spent before the first iteration (by the behaviour-cloning stage, or by the run a
        `Trainer` resumes) trains none."""
        if not trainer.stop and self._spent(trainer, trainer.env_steps):
            trainer.stop = True

    def should_stop(self, trainer: Trainer, record: IterationRecord) -> bool:
        return self._spent(trainer, record.env_steps)

    def _spent(self, trainer: Trainer, env_steps: int) -> bool:
        if self.seconds is not None and trainer.elapsed() > self.seconds:
            trainer.stopped = "time_limit_min"
        elif self.max_env_steps is not None and env_steps >= self.max_env_steps:
            trainer.stopped = "max_env_steps"
        else:
            return False
        return True


class Evaluation(Hook):
    """Evaluates on the held-out seeds every `every` iterations and after the last one (and at
    the start from a pretrained policy or with `eval_at_start`); keeps the best checkpoint; ends
    the run at the first evaluation at `target` success or above, recording when (hooks after
    it see `final` set). The evaluation after a last iteration between scheduled ones (a budget's
    end) is reported only: it reaches no target and sets no best rate (best.pt only where there is
    none), so that a run stopped there and resumed goes on as one that ran straight through.
    With `min_train_success`, a due evaluation is skipped while that
    iteration's training success is below it: evaluation draws on streams of its own, so
    training goes on exactly as it would have, and only the skipped evaluations' time is saved
    (and the target found no earlier than the next evaluation that runs)."""

    def __init__(self, every: int, target: float | None, at_start: bool, min_train_success: float | None = None):
        self.every, self.target, self.at_start, self.min_train_success = every, target, at_start, min_train_success

    def on_start(self, trainer: Trainer) -> None:
        if trainer.cfg.resume:
            trainer.rebase_best()
        if trainer.iteration == 0 and (trainer.pretrained is not None or self.at_start):
            if trainer.pretrained is None:
                trainer.pretrained = {"source": f"random initial weights (seed {trainer.cfg.seed})"}
            # the starting point, on the same held-out seeds, at env step 0 (the BC stage evaluated already,
            # unless this run resumes one stopped at iteration 0: the clone is evaluated again)
            initial = trainer.last_eval
            if not (trainer.cfg.pretrain and initial is not None):
                initial = trainer.evaluate()
            trainer.pretrained["eval"] = initial.to_json(episodes=False)
            trainer.log(eval_scalars(initial), 0)
            if initial.rate > trainer.best_eval:  # the start is an evaluated policy: best.pt until one beats it
                trainer.best_eval = initial.rate
                trainer.save("best")
        if trainer.iteration == 0 and trainer.last_eval is not None and self._reached(trainer, trainer.last_eval):
            trainer.stop = True  # the start already meets the target: it is the run's result (saved as last.pt)
        elif self.target is not None and trainer.target.get("reached"):
            trainer.stop, trainer.stopped = True, "target_success"  # a resumed run that had reached it: no training

    def after_iteration(self, trainer: Trainer, record: IterationRecord) -> None:
        scheduled = record.iteration % self.every == 0
        if not record.final:
            if not scheduled:
                return
            gate = self.min_train_success
            if gate is not None and policy_success(record.scalars, default=1.0) < gate:
                return
        result = record.evaluation = trainer.evaluate()
        record.scalars.update(eval_scalars(result))
        if not scheduled:  # the last iteration of a budget (iterations, time, env steps) between scheduled ones:
            # reported, but it neither reaches the target nor sets the best rate, which a run stopped here and
            # resumed would then hold where one that ran straight through never evaluates; it is best.pt only
            # while the run has none (a resumed run's next evaluation replaces it, as the straight run's writes one)
            record.best = not (trainer.run_dir / "checkpoints" / "best.pt").exists()
            return
        if self._reached(trainer, result):
            record.final = True
        if result.rate > trainer.best_eval:
            trainer.best_eval = result.rate
            record.best = True  # written by Checkpoints, after the user's hooks: best.pt holds their state too

    def _reached(self, trainer: Trainer, result: EvalResult) -> bool:
        """Record the first evaluation at the target or above in `trainer.target`; True when it is this one."""
        if self.target is None or trainer.target.get("reached") or result.rate < self.target:
            return False
        # the whole run's time, as its env steps are (the processes it was resumed from included)
        seconds = trainer.run_seconds()
        trainer.stopped = "target_success"
        trainer.target.update(reached=True, iteration=trainer.iteration, env_steps=trainer.env_steps,
                              success=result.rate, seconds=seconds,
                              train_seconds=seconds - trainer.eval_seconds_before - trainer.eval_seconds)  # fmt: skip
        return True


class Checkpoints(Hook):
    """Saves `checkpoints/last.pt` every `every` iterations, after every evaluation and at the end,
    and `checkpoints/best.pt` after an evaluation that is the best so far."""

    def __init__(self, every: int) -> None:
        self.every = every

    def after_iteration(self, trainer: Trainer, record: IterationRecord) -> None:
        if record.best:
            trainer.save("best")
        if record.iteration % self.every == 0 or record.evaluation is not None or record.final:
            trainer.save("last")


class TensorBoard(Hook):
    """Writes every logged scalar to `<run_dir>/tb`. A write that fails (a full disk) ends the run
    with a one-line `WriteError` naming the folder; the checkpoints written before stay intact.
    A resumed run purges what the run before it logged past its checkpoint (a run killed after
    it, or rolled back), so that TensorBoard shows each step once, as the resumed run logs it."""

    def __init__(self) -> None:
        self.writer = None
        self.folder = None

    def on_start(self, trainer: Trainer) -> None:
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self.folder = trainer.run_dir / "tb"
            purge, again = None, {}
            if trainer.cfg.resume:  # at iteration 0 its start is logged again
                again = trainer.resumed_scalars if trainer.iteration > 0 else {}
                # the checkpoint's iteration: logged again from the scalars it keeps (a process can end after
                # writing it and before its loggers ran); one written before it kept them was logged
                purge = trainer.env_steps + (trainer.iteration > 0 and not again)
            self.writer = SummaryWriter(str(self.folder), purge_step=purge)
            _quiet_on_write_errors(self.writer)
            for tag, value in again.items():
                self.writer.add_scalar(tag, value, trainer.env_steps)
            if not trainer.cfg.resume:  # the run's settings beside its curves (TensorBoard's Text tab)
                from omegaconf import OmegaConf

                text = OmegaConf.to_yaml(config_dict(trainer.cfg))  # not trainer.state(): no copy of the weights
                self.writer.add_text("config", "    " + text.replace("\n", "\n    "), 0)  # a code block

    def on_log(self, trainer: Trainer, scalars: dict[str, float], step: int) -> None:
        if self.writer is None:
            self.on_start(trainer)
        try:
            for tag, value in scalars.items():
                self.writer.add_scalar(tag, value, step)
        except OSError as err:
            writer, self.writer = self.writer, None
            _close_quietly(writer)
            raise WriteError(self.folder, err) from None

    def on_video(self, trainer: Trainer, clip: Clip, step: int) -> None:
        """The clip as an animated GIF in the Images tab (TensorBoard's own video summary needs
        moviepy; a GIF image summary is what it writes too)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        if self.writer is None:
            self.on_start(trainer)
        from grpo_robot.video import gif_bytes

        frames, fps = clip.small()
        image = Summary.Image(height=frames.shape[1], width=frames.shape[2], colorspace=3,
                              encoded_image_string=gif_bytes(frames, fps))  # fmt: skip
        try:
            self.writer._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=clip.tag, image=image)]), step)
        except OSError as err:
            writer, self.writer = self.writer, None
            _close_quietly(writer)
            raise WriteError(self.folder, err) from None

    def close(self) -> None:
        if self.writer is not None:
            _close_quietly(self.writer)
            self.writer = None


# TensorBoard's writer threads whose failed writes the run reports itself (`_quiet_on_write_errors`)
_QUIET_THREADS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_default_excepthook = threading.excepthook


def _excepthook(args: threading.ExceptHookArgs) -> None:
    if args.thread in _QUIET_THREADS and isinstance(args.exc_value, OSError):
        return  # the next write on the main thread raises it again, as the run's one-line WriteError
    _default_excepthook(args)


def _quiet_on_write_errors(writer) -> None:
    """A SummaryWriter writes from a thread of its own. When a write fails there (a full disk), the
    thread keeps the error for the main thread's next write, which `TensorBoard` turns into the
    run's one-line `WriteError`, and then raises it, so Python printed the thread's traceback
    above that line. Such a thread's OSError is now left to the main thread; any other error, or
    any other thread's, is printed as before."""
    global _default_excepthook
    worker = getattr(getattr(getattr(writer._get_file_writer(), "event_writer", None), "_async_writer", None),
                     "_worker", None)  # fmt: skip
    if isinstance(worker, threading.Thread):
        _QUIET_THREADS.add(worker)
        if threading.excepthook is not _excepthook:
            _default_excepthook = threading.excepthook
            threading.excepthook = _excepthook


def _close_quietly(writer) -> None:
    """Close a SummaryWriter whose folder may not take more (its error was reported already)."""
    try:
        writer.close()
    except OSError:
        pass


class Refused(ValueError):
    """A hook's `on_begin` refused the run before any work (a logger's service, a filming env that
    cannot render); the message is one line. The command line removes the run directory it made
    for the run and exits with code 2, as for a bad setting."""


class LoggerError(Refused):
    """A logger's service refused the run; the message is one line."""


class WandB(Hook):
    """Logs every scalar to Weights & Biases under the same names as TensorBoard (x-axis: env
    steps), the resolved config as the run's config. The W&B run id comes from the run directory,
    so a resumed run continues the same W&B run."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg, self.run = cfg.wandb, None

    def on_begin(self, trainer: Trainer) -> None:
        self.on_start(trainer)  # W&B refuses a run without a login: before any work, not after it

    def on_start(self, trainer: Trainer) -> None:
        if self.run is not None:
            return
        import hashlib

        import wandb

        run_dir = trainer.run_dir.resolve()
        sweep = run_dir.parent.name if (run_dir.parent / "multirun.yaml").is_file() else None  # a -m job's folder
        try:
            self.run = wandb.init(
                project=self.cfg.project, entity=self.cfg.entity, mode=self.cfg.mode, dir=str(run_dir),
                name=f"{sweep}/{run_dir.name}" if sweep else run_dir.name, group=self.cfg.group or sweep,
                tags=list(self.cfg.tags) or None, id=hashlib.sha1(str(run_dir).encode()).hexdigest()[:16],
                resume="allow", config=trainer.state()["config"], settings=wandb.Settings(console="off", silent=True),
            )  # fmt: skip
        except Exception as err:  # noqa: BLE001  (no login, no network, a bad project or entity)
            raise LoggerError(f"loggers=[...,wandb]: Weights & Biases could not start a run ({one_line(err)}); log in "
                              "(`wandb login`, or WANDB_API_KEY), or set wandb.mode=offline") from None
        if trainer.cfg.resume and trainer.iteration > 0 and trainer.resumed_scalars:
            # the checkpoint's iteration, as TensorBoard logs it again: W&B keeps a step it already has
            # (steps only go forward) and takes one the ended process saved but did not log
            self.run.log(dict(trainer.resumed_scalars), step=trainer.env_steps)

    def on_log(self, trainer: Trainer, scalars: dict[str, float], step: int) -> None:
        if self.run is None:
            self.on_start(trainer)
        self.run.log(dict(scalars), step=step)

    def on_video(self, trainer: Trainer, clip: Clip, step: int) -> None:
        """Each filmed episode's MP4 under the clip's tag (a W&B video panel)."""
        import wandb

        if self.run is None:
            self.on_start(trainer)
        videos = [wandb.Video(str(p), caption=p.stem, format="mp4") for p in clip.files if p.suffix == ".mp4"]
        self.run.log({clip.tag: videos}, step=step)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


class Videos(Hook):
    """Every `every`-th evaluation (counted as iteration // eval_every, so resuming keeps the
    schedule), the run's last one, and the initial one of a pretrained policy, films `episodes`
    of the evaluated seeds, successes and failures alike (grpo_robot/video.py), with the policy
    just evaluated: MP4s in `<run dir>/videos/iter_<k>/` and one tiled clip to the loggers
    (`on_video`, tag `videos/eval`). The filming env is its own, so training is unchanged; its
    time counts as evaluation time (left out of time-to-target)."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.every, self.episodes, self.render, self.eval_every = (cfg.video_every, cfg.video_episodes,
                                                                   cfg.render, cfg.eval_every)  # fmt: skip
        self.env = None
        self.failed: str | None = None  # why filming stopped for the rest of the run

    def on_begin(self, trainer: Trainer) -> None:
        """The filming env is built, and renders a frame, before any work: an env that cannot
        render is one line now, not after the training it would have ended."""
        from grpo_robot import video

        try:
            self.env = video.make_video_env(trainer.cfg, self.episodes)
        except ValueError as err:
            raise Refused(str(err)) from None
        if trainer.cfg.env.group_start == "clone":
            log.warning("videos: %s", video.NEW_EPISODES)

    def on_start(self, trainer: Trainer) -> None:
        if trainer.iteration == 0 and trainer.last_eval is not None:  # the starting policy was evaluated
            self.film(trainer, trainer.last_eval)

    def after_iteration(self, trainer: Trainer, record: IterationRecord) -> None:
        if record.evaluation is not None and ((record.iteration // self.eval_every) % self.every == 0 or record.final):
            self.film(trainer, record.evaluation)

    def film(self, trainer: Trainer, result: EvalResult) -> None:
        """Films of `result`'s seeds. Where the env fails to render mid-run (it rendered when the
        run began), the videos stop with a warning and the training goes on: they are optional."""
        import time

        from grpo_robot import video
        from grpo_robot.gym_vector import EnvFailure

        if self.failed is not None:
            return
        start, cfg = time.perf_counter(), trainer.cfg
        seeds = video.pick_seeds(result, self.episodes)
        try:
            if self.env is None:
                self.env = video.make_video_env(cfg, len(seeds))
            folder = trainer.run_dir / "videos" / f"iter_{trainer.iteration:06d}"
            episodes, files, fps = video.film_evaluated(self.env, trainer.policy, result, seeds, trainer.device,
                                                        self.render, folder, cfg.eval_deterministic,
                                                        cfg.env.outcome == "final_step")  # fmt: skip
        except WriteError:
            raise  # the run directory cannot be written: the checkpoints cannot either
        except (EnvFailure, ValueError) as err:
            self.failed = str(err)
            log.warning("videos: %s; no more videos in this run (iteration %d), which trains on", err,
                        trainer.iteration)  # fmt: skip
            self.close()
            return
        finally:
            trainer.eval_seconds += time.perf_counter() - start
        trainer.log_video(video.Clip("videos/eval", video.tile([e.labelled() for e in episodes]), fps, files),
                          trainer.env_steps)  # fmt: skip

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class ProgressBar(Hook):
    """A console progress bar with the last train and eval success. Its total is the iterations
    the run will take: `iterations`, or fewer where the env-step budget (`max_env_steps`) will end
    it first, as projected from the env steps an iteration has taken so far (the default job's
    1000 iterations end at 6 M env steps, after about 300)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.bar = enabled, None

    def on_start(self, trainer: Trainer) -> None:
        from tqdm import tqdm

        total = trainer.cfg.iterations
        self.bar = tqdm(total=total, initial=trainer.iteration, disable=not self.enabled, unit="it", dynamic_ncols=True)

    def after_iteration(self, trainer: Trainer, record: IterationRecord) -> None:
        postfix = {"success": f"{policy_success(record.scalars):.2f}"}  # every group drawn, as the curriculum reads it
        if trainer.last_eval is not None:
            postfix["eval"] = f"{trainer.last_eval.rate:.2f}"
        self.bar.set_postfix(postfix, refresh=False)
        spent = trainer.progress()
        if spent > 0 and trainer.cfg.max_env_steps:
            self.bar.total = max(trainer.iteration, min(trainer.cfg.iterations, math.ceil(trainer.iteration / spent)))
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class StdAnneal(Hook):
    """`algo.std_anneal`: the Gaussian's free std is capped by a value that falls geometrically
    from `start` (policy.init_std) to `final` over `iterations` iterations, then stays there. The
    cap for iteration i is set before it runs (at the start too, so a resumed run goes on with the
    same schedule); the learned std may sit below it. Logs the cap as `charts/std_cap`."""

    def __init__(self, start: float, final: float, iterations: int) -> None:
        self.start, self.final, self.iterations = start, final, iterations

    def cap(self, iteration: int) -> float:
        return self.start * (self.final / self.start) ** min(1.0, iteration / self.iterations)

    def on_start(self, trainer: Trainer) -> None:
        trainer.policy.cap_std(self.cap(trainer.iteration))

    def after_iteration(self, trainer: Trainer, record: IterationRecord) -> None:
        record.scalars["charts/std_cap"] = self.cap(record.iteration - 1)  # the cap this iteration ran under
        trainer.policy.cap_std(self.cap(record.iteration))


class StartCurriculum(Hook):
    """`algo.curriculum`: training starts are drawn at a difficulty below the task's own (for
    PushCube, the goal nearer the cube) and made harder by `step` after every iteration whose
    training success reaches `threshold`, up to 1: the task as evaluated. From random weights an
    outcome-only reward teaches nothing until some rollout succeeds by chance; near goals bring
    those successes early, and what the policy learns there carries over as the goals move out.
    The sampler resets its draws at the difficulty (the Ray workers too); evaluation always runs
    the task's own starts. Logs `charts/difficulty`, the difficulty each iteration ran at; the
    current one is part of the checkpoint."""

    def __init__(self, start: float, step: float, threshold: float) -> None:
        self.difficulty, self.step, self.threshold = start, step, threshold

    def on_start(self, trainer: Trainer) -> None:
        if not hasattr(trainer.env, "difficulty"):
            raise ConfigError(f"algo.curriculum.start={self.difficulty:g} is invalid: the training env "
                              f"({type(trainer.env).__name__}) has no easier starts; null = off")  # fmt: skip
        trainer.sampler.difficulty = self.difficulty

    def after_iteration(self, trainer: Trainer, record: IterationRecord) -> None:
        record.scalars["charts/difficulty"] = self.difficulty
        if self.difficulty < 1.0 and policy_success(record.scalars) >= self.threshold:
            self.difficulty = min(1.0, round(self.difficulty + self.step, 12))  # lands on 1 exactly
            trainer.sampler.difficulty = self.difficulty

    def state_dict(self) -> dict[str, Any]:
        return {"difficulty": self.difficulty}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.difficulty = float(state["difficulty"])


def config_hooks(cfg: TrainConfig) -> list[Hook]:
    """The hooks the config names (`hooks: [module:Class, ...]`), each made with no arguments."""
    from grpo_robot.gym_vector import load_callable

    made = []
    for path in cfg.hooks:
        factory = load_callable(path, "hooks")
        try:
            hook = factory()
        except Exception as err:  # before any training: refused as a bad setting, its directory removed
            raise ConfigError(f"hooks={list(cfg.hooks)}: {path}() raised {type(err).__name__}: {err}") from err
        if not isinstance(hook, Hook):
            raise ConfigError(f"hooks={list(cfg.hooks)}: {path} gave a {type(hook).__name__}, not a "
                              "grpo_robot.hooks.Hook")  # fmt: skip
        made.append(hook)
    return made


def default_hooks(cfg: TrainConfig, user: Sequence[Hook] = ()) -> list[Hook]:
    """The hooks every run has, in the order they run, with the `user`'s after the evaluation (an
    iteration's record carries it) and before the periodic checkpoint (which then holds their
    state after the iteration, as a resumed run needs it) and the loggers (which log their scalars)."""
    anneal, curriculum = cfg.algo.std_anneal, cfg.algo.curriculum
    return [
        Budget(cfg.time_limit_min, cfg.max_env_steps),
        *([StdAnneal(cfg.policy.init_std, anneal.final, anneal.iterations)] if anneal.final is not None else []),
        *([StartCurriculum(curriculum.start, curriculum.step, curriculum.threshold)]
          if curriculum.start is not None else []),  # fmt: skip
        Evaluation(cfg.eval_every, cfg.target_success, cfg.eval_at_start, cfg.eval_min_train_success),
        *user,
        Checkpoints(cfg.checkpoint_every),
        *([TensorBoard()] if "tensorboard" in cfg.loggers else []),
        *([WandB(cfg)] if "wandb" in cfg.loggers else []),
        *([Videos(cfg)] if cfg.video_every else []),
        ProgressBar(cfg.progress),
    ]
