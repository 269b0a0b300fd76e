"""The training loop, wired from a validated `TrainConfig`:

    seeds -> GroupSampler (rollout.py) -> advantages (GroupAdvantages or a Critic) -> Learner
    (update.py, the registered policy loss of algo.py) -> hooks (hooks.py: budgets, evaluation,
    checkpoints, TensorBoard, videos, progress)

`train_iteration()` is one pass down that corridor; `run()` is the loop around it and the
hooks. Scripts and tests call the same two.

Nothing is lost when a run ends early: after every iteration the trainer keeps a copy of its state
(the "boundary", what `last.pt` would hold); a signal (grpo_robot/signals.py), an error that ends the
run (a broken env, an update that stays non-finite, a disk that is full) or a hung env
(grpo_robot/lifecycle.py) writes that state as `last.pt`, and `summary.json` says why the run
stopped (`"stopped"`: iterations, max_env_steps, time_limit_min, target_success, signal, error, or
the class name of a custom hook whose `should_stop` ended it without setting `trainer.stopped`).

Metric names (TensorBoard, x-axis = env steps):
  charts/  train_success, eval_success, eval_success_low, eval_success_high, mixed_groups,
           episode_steps, success_steps, success_steps_max (control steps of the training rollouts:
           all, and the successful ones), mean_abs_advantage, failed_worlds, env_steps_per_s,
           learning_rate; with dynamic sampling also groups_drawn, groups_kept, drawn_success
           (train_success is then over kept groups; mixed_groups, and the progress bar's success,
           over every group drawn);
           with algo.std_anneal also std_cap; with algo.curriculum also difficulty; with
           algo.start_replay also replayed_groups (share of the groups drawn from replayed seeds) and
           replay_starts (seeds held for replay);
           with a critic (algo=ppo) also explained_variance
  losses/  policy_loss, clip_fraction, approx_kl, kl_ref, entropy, grad_norm, skipped_fraction
           (optimizer steps skipped for a non-finite loss or gradient); with a critic value_loss.
           An iteration whose update took no step (no mixed group, and no KL or entropy term) logs
           only entropy, grad_norm and skipped_fraction: a chart's line then bridges a gap
  time/    rollout_s, update_s; run_s with every logged step (the run's own seconds since training
           started, over all the processes of a resumed run: what plots and reports time runs by);
           with rollout.backend=ray also worker_wait_s (waiting beyond the fastest worker)
  videos/  eval (with `video_every`: the filmed episodes of an evaluation, tiled; an animated image)
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from omegaconf import OmegaConf

from grpo_robot import checkpoint, lifecycle, machine, rundir
from grpo_robot.algo import ADVANTAGE_ESTIMATORS, mixed_fraction
from grpo_robot.config import ConfigError, TrainConfig, config_dict, policy_kwargs, validate
from grpo_robot.demos import TooFewDemos
from grpo_robot.device import resolve_device
from grpo_robot.environment import GroupEnv, action_bounds, env_identity, make_env, make_eval_env
from grpo_robot.evaluation import EvalResult, eval_labels, evaluate
from grpo_robot.gym_vector import EnvFailure
from grpo_robot.hooks import Hook, IterationRecord, config_hooks, default_hooks
from grpo_robot.policies import Policy, build_policy
from grpo_robot.rollout import Batch, GroupSampler, RolloutError
from grpo_robot.seeding import STREAM_EVAL, eval_seeds, stream_seed
from grpo_robot.signals import Interrupted, SignalGuard
from grpo_robot.start_replay import start_replay
from grpo_robot.update import AdvantageSource, GroupAdvantages, Learner, TrainingDiverged

if TYPE_CHECKING:
    from grpo_robot.video import Clip

log = logging.getLogger(__name__)
# what ends a run early with an error, its last completed iteration saved: a broken env, an update
# that keeps going non-finite, a file that cannot be written, a hook state it cannot keep
RUN_ERRORS: tuple[type[BaseException], ...] = (TrainingDiverged, EnvFailure, RolloutError, checkpoint.WriteError,
                                               checkpoint.NonFiniteError, checkpoint.UnsafeState,
                                               TooFewDemos)  # fmt: skip


def episode_scalars(batch: Batch) -> dict[str, float]:
    """Control steps per training rollout: `charts/episode_steps` (mean over all), and over the
    successful ones `charts/success_steps` (mean) and `charts/success_steps_max` (left out when none
    succeeded). Failures run to the training horizon; when the successes end well inside it,
    `algo.train_horizon` cuts the failures short and spends fewer env steps on them."""
    steps = batch.mask.sum(0).float()
    scalars = {"charts/episode_steps": steps.mean().item()}
    won = steps[batch.success > 0.5]
    if len(won):
        scalars.update({"charts/success_steps": won.mean().item(), "charts/success_steps_max": won.max().item()})
    return scalars


class Trainer:
    """Builds everything from `cfg` (validated first); `run()` trains and returns a summary.
    `env` replaces the configured training env (any `GroupEnv`); `hooks` run after the defaults.
    `resumed` is `cfg.resume`'s checkpoint when the caller has read it already (the command line
    reads it once, for its checks and the run's config, and hands it on); None reads it here."""

    def __init__(self, cfg: TrainConfig, run_dir: str | Path, hooks: Sequence[Hook] = (),
                 env: GroupEnv | None = None, resumed: checkpoint.Checkpoint | None = None) -> None:  # fmt: skip
        validate(cfg)  # before any environment is built
        if resumed is not None and not cfg.resume:
            raise ValueError("Trainer(resumed=...) is the checkpoint of cfg.resume, and cfg.resume is not set")
        self._resumed = resumed
        self.cfg, self.run_dir, self.device = cfg, Path(run_dir), resolve_device(cfg.device)
        algo = cfg.algo
        worlds = algo.groups_per_iter * algo.group_size
        if cfg.rollout.backend == "ray" and not cfg.env.task:  # the workers hold the training worlds
            worlds = min(worlds, cfg.eval_seeds)  # here: sizes and evaluation
        self.env = env if env is not None else make_env(cfg.env, worlds)
        try:
            self._build(cfg, hooks)
        except BaseException:  # nothing it started is left running: env workers, a local Ray
            self.close()
            raise

    def _build(self, cfg: TrainConfig, hooks: Sequence[Hook]) -> None:
        """The rest of the trainer, once its env is built (`close` releases what it started)."""
        algo = cfg.algo
        self.eval_env = make_eval_env(cfg, cfg.eval_seeds, self.env)
        horizon = self.env.horizon  # of training rollouts: algo.train_horizon, at most the env's
        if algo.train_horizon is not None:
            if algo.train_horizon > self.env.horizon:  # a Gymnasium env's horizon is known only now
                raise ConfigError(f"algo.train_horizon={algo.train_horizon} is invalid: must be <= the env's "
                                  f"horizon ({self.env.horizon}), which evaluation runs; null = that horizon")
            horizon = algo.train_horizon
        task = None
        if cfg.env.task:
            from grpo_robot.envs import make_task

            task = make_task(cfg.env.task)  # its expert makes demos, its potential shapes PPO's reward

        torch.manual_seed(cfg.seed)  # initial weights
        kwargs = policy_kwargs(cfg.policy, cfg.env)
        policy = build_policy(cfg.policy.type, self.env.obs_dim, self.env.action_dim, **kwargs).to(self.device)
        self.pretrained: dict[str, Any] | None = None  # how the initial policy was made: {"source", "eval", ...}
        # a resumed run takes its weights from its checkpoint: the files it started from need not exist now
        if cfg.init_from and not cfg.resume:
            self.pretrained = {"source": str(checkpoint.resolve(cfg.init_from))}
            policy.load_state_dict(checkpoint.initial_policy_weights(cfg.init_from, cfg, self.env, self.device, policy))
        self.update_obs_norm = cfg.obs_norm_updates
        if self.update_obs_norm is None:  # a pretrained policy keeps the inputs it was trained on
            self.update_obs_norm = not (cfg.init_from or cfg.pretrain)
        self.demos = None  # a given dataset is checked before any work starts
        if cfg.pretrain and cfg.demos.path and not cfg.resume:
            from grpo_robot.datasets import load_demos

            self.demos = load_demos(cfg.demos.path, cfg.env, self.env, filter_key=cfg.demos.filter_key)
        self.critic = None  # PPO's value function, when the advantage estimator needs one
        self.advantage_source: AdvantageSource = GroupAdvantages(algo)
        if ADVANTAGE_ESTIMATORS[algo.advantage].needs_critic:
            from grpo_robot.critic import Critic

            sizes, activation = list(cfg.policy.hidden_sizes), cfg.policy.activation
            self.critic = Critic(self.env.obs_dim, sizes, activation, algo, task).to(self.device)
            self.advantage_source = self.critic
        extra = [] if self.critic is None else [self.critic]
        self.learner = Learner(policy, algo, horizon, cfg.iterations, cfg.seed, self.device, extra)
        sampling = algo.dynamic_sampling
        if cfg.rollout.backend == "ray":
            from grpo_robot.ray_rollout import RaySampler

            self.sampler: GroupSampler = RaySampler(cfg, policy, self.device)
        else:
            if hasattr(self.env, "parallel_parts"):
                self.env.parallel_parts = cfg.rollout.parallel_parts
                self.env.take_turns = cfg.rollout.take_turns
            self.sampler = GroupSampler(self.env, cfg.seed, algo.groups_per_iter, algo.group_size, self.device,
                                        cfg.env.outcome == "final_step", tuple(sampling.keep_range)
                                        if sampling.enabled else None, sampling.max_rounds,
                                        cfg.rollout.split, cfg.rollout.policy_threads,
                                        algo.noise_correlation, algo.train_horizon, start_replay(algo))  # fmt: skip
        self.hooks = default_hooks(cfg, [*config_hooks(cfg), *hooks])
        self.iteration = self.env_steps = 0
        self.best_eval = -1.0
        self.last_eval: EvalResult | None = None
        self.eval_seconds = 0.0  # spent in evaluations, so time-to-target can leave them out
        self.seconds_before = 0.0  # the run's time in the processes it was resumed from
        self.eval_seconds_before = 0.0  # and the part of it spent evaluating
        self.target: dict[str, Any] = {} if cfg.target_success is None else {"target": cfg.target_success,
                                                                              "reached": False}  # fmt: skip
        self.stop = False  # a hook's request to end the run before the next iteration
        self.stopped: str | None = None  # why the run ended (summary.json's "stopped")
        self.error: str | None = None  # the one-line error that ended it, if one did
        self.diverged = False  # that error was the training's divergence (non-finite steps, or BC's loss)
        self.signal: str | None = None  # the signal that ended it, if one did
        self.guard: SignalGuard | None = None  # while run() runs
        self._boundary: dict[str, Any] | None = None  # state() after the last completed iteration, copied
        self._boundary_eval: EvalResult | None = None  # the evaluation it reports
        self._resumed_eval: dict[str, Any] | None = None  # a resumed run's last evaluation, until it evaluates again
        self._scalars: dict[str, float] = {}  # the current iteration's, for its checkpoint
        self.resumed_scalars: dict[str, float] = {}  # those of the checkpoint a resumed run starts from
        self._eval_changed = False  # a resumed run evaluates otherwise (eval_seeds, eval_deterministic) than before
        self._config_record = config_dict(cfg)
        self.start_time = time.perf_counter()
        if cfg.resume:
            from grpo_robot.resume import check_same_run

            ckpt = self._resumed or checkpoint.load(cfg.resume, map_location=self.device, purpose="resume")
            self._resumed = None  # its tensors are copied into the policy and the optimizer: not held twice
            check_same_run(ckpt["config"], cfg, f"resume={cfg.resume}")
            checkpoint.check_env(ckpt, cfg.env, f"resume={cfg.resume}", self.env)  # the layout it trained on
            self._restore(ckpt)
            threads = ckpt.get("torch_threads")
            if self.device.type == "cpu" and threads is not None and threads != torch.get_num_threads():
                log.warning("resume=%s: the run trained with %d torch CPU threads and this process has %d; a "
                            "reduction split over another number of threads sums in another order, so the run goes "
                            "on close to, not bit-identical with, one never stopped (torch.set_num_threads(%d), or "
                            "OMP_NUM_THREADS=%d, keeps it)", cfg.resume, threads, torch.get_num_threads(), threads,
                            threads)  # fmt: skip
            # its summary speaks for the whole run: its time so far, and where its policy came from (the
            # pretraining stage does not run again); checkpoints written before either was kept lack them
            self._resumed_eval = ckpt.get("eval")  # reported as the run's last until this process evaluates
            self.resumed_scalars = ckpt.get("scalars") or {}  # its iteration's, logged again (TensorBoard)
            self.seconds_before = float(ckpt.get("seconds") or 0.0)
            self.eval_seconds_before = float(ckpt.get("eval_seconds") or 0.0)
            self.pretrained = ckpt.get("initial_policy") or (
                {"source": str(cfg.init_from)} if cfg.init_from else None)
            reached = ckpt.get("target") or {}  # a target reached before is not reached again (nor its record lost)
            if reached.get("reached") and reached.get("target") == cfg.target_success:
                self.target = dict(reached)
            before = ckpt["config"]
            deterministic = cfg.eval_deterministic
            then = (before.get("policy") or {}).get("decode", cfg.policy.decode) if deterministic else None
            now = cfg.policy.decode if deterministic else None
            self._eval_changed = (before.get("eval_seeds"), before.get("eval_deterministic"), then) != (
                cfg.eval_seeds, deterministic, now)  # fmt: skip

    @property
    def policy(self) -> Policy:
        return self.learner.policy

    def elapsed(self) -> float:
        """Seconds since `run()` started (since construction before it)."""
        return time.perf_counter() - self.start_time

    def run_seconds(self) -> float:
        """The run's own seconds: this process's (`elapsed`) and those of the processes it resumes."""
        return self.seconds_before + self.elapsed()

    def log(self, scalars: dict[str, float], step: int) -> None:
        """`scalars` at env step `step` to every hook, with the run's own time (`time/run_s`)."""
        scalars = {**scalars, "time/run_s": self.run_seconds()}
        for hook in self.hooks:
            hook.on_log(self, scalars, step)

    def log_video(self, clip: Clip, step: int) -> None:
        for hook in self.hooks:
            hook.on_video(self, clip, step)

    def progress(self) -> float:
        """The fraction of the run's budget spent: iterations or env steps (`max_env_steps`),
        whichever is nearer its end; the wall-clock limit is left out, so that runs repeat."""
        spent = self.iteration / self.cfg.iterations
        if self.cfg.max_env_steps:
            spent = max(spent, self.env_steps / self.cfg.max_env_steps)
        return spent

    def train_iteration(self) -> IterationRecord:
        """One iteration: draw the groups, score them, update the policy. -> its metrics."""
        it = self.iteration
        t0 = time.perf_counter()
        with self.guard.abandonable() if self.guard is not None else nullcontext():  # nothing changed yet
            batch, sampling = self.sampler.sample(self.policy, it)
        t1 = time.perf_counter()
        advantages, adv_metrics = self.advantage_source.advantages(batch, self.policy)
        update = self.learner.update(batch, advantages, it, self.advantage_source.every_step, self.progress())
        if self.update_obs_norm:  # after the update: one normalization per iteration
            self.policy.update_inputs(batch.obs[batch.mask])  # the valid steps, in packed (t-major) order
        t2 = time.perf_counter()
        self.iteration, self.env_steps = it + 1, self.env_steps + batch.simulated_steps
        scalars = {
            "charts/train_success": batch.success.mean().item(),
            "charts/mixed_groups": mixed_fraction(batch.success.view(-1, self.cfg.algo.group_size)),
            "charts/failed_worlds": batch.failed.float().mean().item(),
            **episode_scalars(batch),
            "charts/env_steps_per_s": batch.simulated_steps / (t1 - t0),
            "charts/learning_rate": self.learner.lr,
            "time/rollout_s": t1 - t0,
            "time/update_s": t2 - t1,
            **{k if "/" in k else f"charts/{k}": v for k, v in {**adv_metrics, **sampling}.items()},
            **{f"losses/{k}": v for k, v in update.items()},
        }
        return IterationRecord(self.iteration, self.env_steps, scalars, final=self.iteration >= self.cfg.iterations)

    def run(self) -> dict[str, Any]:
        """Train until `cfg.iterations`, a budget, a target, a signal or an error; write `summary.json`
        -> the summary. The run directory is locked for this process first (grpo_robot/rundir.py)."""
        locked_here = not rundir.is_held(self.run_dir)  # else the command line locked it for the whole process
        rundir.lock(self.run_dir, "run directory")
        for stale in (self.run_dir / "checkpoints").glob(".*.tmp"):  # a write cut short by SIGKILL
            stale.unlink(missing_ok=True)
        try:
            for hook in self.hooks:  # a hook that refuses the run (hooks.Refused) finds nothing written yet
                hook.on_begin(self)
            checkpoint.write_text_atomic(self.run_dir / "resolved_config.yaml", OmegaConf.to_yaml(self._config_record))
        except BaseException:
            for hook in self.hooks:
                hook.close()
            if locked_here:
                rundir.release(self.run_dir)
            raise
        # the run's seconds start here, after the hooks' set-up (a W&B login, a filming env built and
        # tried): runs with and without them are timed alike
        self.start_time = time.perf_counter()
        remove_emergency = lifecycle.on_emergency(self._emergency)
        try:
            with SignalGuard() as self.guard:
                try:
                    self._loop()
                    self.guard.stopping()
                except Interrupted:
                    self.guard.stopping()
                    self.stopped = "signal"
                    self._roll_back()
                except RUN_ERRORS as err:
                    self.guard.stopping()
                    self.stopped, self.error = "error", str(err)
                    self.diverged = isinstance(err, TrainingDiverged)  # the settings' doing, not the machine's
                    self._roll_back()
                except Exception as err:  # anything else (a user's hook, an env's odd value): saved alike
                    self.guard.stopping()
                    log.error("the run ended on an unexpected error", exc_info=err)  # the traceback, for the log
                    self.stopped, self.error = "error", f"{type(err).__name__}: {err}"
                    self._roll_back()
                if self.stopped == "signal":
                    self.signal = self.guard.name
                summary = self.summary()
                for hook in self.hooks:
                    hook.on_end(self, summary)
        finally:
            self.guard = None
            remove_emergency()
            for hook in self.hooks:
                hook.close()
        try:
            self._write_summary(summary)
        except checkpoint.WriteError as err:
            if self.error is None:
                summary.update(stopped="error", error=str(err))
        if locked_here:
            rundir.release(self.run_dir)
        return summary

    def _loop(self) -> None:
        cfg = self.cfg
        if cfg.pretrain and self.iteration == 0 and not cfg.resume:
            from grpo_robot.bc import pretrain_stage

            deadline = None if cfg.time_limit_min is None else self.start_time + 60 * cfg.time_limit_min
            self.pretrained = pretrain_stage(cfg, self.run_dir, self.demos, self.device, self._adopt, deadline)
        for hook in self.hooks:  # a hook may end the run before its first iteration (trainer.stop)
            hook.on_start(self)
            if self.stop and self.stopped is None:  # a hook that did not say why: its class name
                self.stopped = type(hook).__name__
        self._boundary = self._snapshot()
        if self.stop and self.iteration == 0:
            self.save("last")  # the starting point (the clone) is the run's result, and resumes from here
        while self.iteration < cfg.iterations and not self.stop:
            if self.guard is not None and self.guard.received is not None:
                self.stopped = "signal"
                break
            record = self.train_iteration()
            self._scalars = record.scalars  # as the hooks fill it: a checkpoint of this iteration keeps them
            stops = [hook.should_stop(self, record) for hook in self.hooks]  # every hook is asked
            if any(stops) and self.stopped is None:  # a hook that did not say why: its class name
                self.stopped = next(type(hook).__name__ for hook, stop in zip(self.hooks, stops, strict=True) if stop)
            record.final = record.final or any(stops)
            for hook in self.hooks:
                hook.after_iteration(self, record)
            self.log(record.scalars, record.env_steps)
            self._boundary = self._snapshot()
            self.stop = record.final
        if self.stopped == "signal":
            self.save("last")  # the boundary just reached
        self.stopped = self.stopped or "iterations"

    def _snapshot(self) -> dict[str, Any]:
        """`state()` with every tensor copied: what `last.pt` holds now, kept while training goes on
        (with the evaluation it reports, which a roll-back restores)."""
        self._boundary_eval = self.last_eval
        return _copied(self.state())

    def _roll_back(self) -> None:
        """Back to the last completed iteration (the boundary) and save it as `last.pt`; nothing is
        saved when no iteration was completed in this run (a stop during the behaviour-cloning stage)."""
        if self._boundary is None:
            return
        self._restore(self._boundary)
        # what is saved and reported is the restored iteration's: its target record (a target reached
        # in the iteration thrown away is reached again by the resume) and its last evaluation
        self.target, self.last_eval = dict(self._boundary["target"]), self._boundary_eval
        try:
            self.save("last")
        except (Interrupted, checkpoint.WriteError) as err:  # the previous last.pt stays intact
            if isinstance(err, checkpoint.WriteError) and self.error is None:
                self.stopped, self.error = "error", str(err)

    def _emergency(self, reason: str) -> str:
        """From another thread, while the main thread hangs in an env: write the boundary as
        `last.pt` and the summary -> what was saved, for the error line."""
        boundary = self._boundary
        if boundary is None:
            return "nothing was saved (no iteration was completed)"
        path = self.run_dir / "checkpoints" / "last.pt"
        checkpoint.save_atomic(boundary, path)
        self.stopped, self.error = "error", reason
        summary = {**self.summary(), "iterations": boundary["iteration"], "env_steps": boundary["env_steps"]}
        self._write_summary(summary)
        return f"saved the last completed iteration ({boundary['iteration']}) to {path}; continue with: " \
               f"python scripts/train.py {rundir.shell_override('resume', self.run_dir)}"  # fmt: skip

    def _write_summary(self, summary: dict[str, Any]) -> None:
        final = self.last_eval  # None after a resume that has not evaluated yet: the summary's is the run's last
        last = final.to_json(episodes=False) if final is not None else summary.get("eval")
        brief = {**summary, "eval": None if last is None else {k: v for k, v in last.items() if k != "episodes"}}
        checkpoint.write_text_atomic(self.run_dir / "summary.json", json.dumps(brief, indent=1))
        if final is not None:
            checkpoint.write_text_atomic(self.run_dir / "eval.json", json.dumps(final.to_json(), indent=1))

    def summary(self) -> dict[str, Any]:
        seconds = self.elapsed()
        return {
            "iterations": self.iteration,
            "env_steps": self.env_steps,
            "seconds": seconds,  # this process's
            "seconds_total": self.seconds_before + seconds,  # with the runs it was resumed from
            "eval": self._resumed_eval if self.last_eval is None else self.last_eval.to_json(),
            "best_eval": None if self.best_eval < 0 else self.best_eval,  # null: no evaluation has chosen best.pt
            "run_dir": str(self.run_dir),
            "initial_policy": self.pretrained,
            "target": self.target,
            "stopped": self.stopped,
            "error": self.error,
            "diverged": self.diverged,  # the error was the training's own divergence (TrainingDiverged)
            "signal": self.signal,
            "eval_seconds": self.eval_seconds,  # this process's
            "eval_seconds_total": self.eval_seconds_before + self.eval_seconds,  # with the runs it was resumed from
            "machine": machine.describe(),
        }

    def _adopt(self, policy: Policy) -> EvalResult:
        self.learner.set_policy(policy)
        return self.evaluate()

    def evaluate(self) -> EvalResult:
        """The policy's success on the `cfg.eval_seeds` held-out seeds (kept as `last_eval`)."""
        self.last_eval = self._evaluate(self.policy, self.iteration)
        return self.last_eval

    def _evaluate(self, policy: Policy, iteration: int) -> EvalResult:
        """`policy` on the held-out seeds, with the evaluation noise of `iteration`."""
        start, cfg = time.perf_counter(), self.cfg
        result = evaluate(self.eval_env, policy, eval_seeds(cfg.eval_seeds), self.device, cfg.eval_deterministic,
                          stream_seed(cfg.seed, iteration, STREAM_EVAL), cfg.env.outcome == "final_step")  # fmt: skip
        result.labels = eval_labels(self.eval_env, cfg.env, "validation", cfg.eval_deterministic,
                                    iteration=int(iteration), env_steps=int(self.env_steps))  # fmt: skip
        self.eval_seconds += time.perf_counter() - start
        return result

    def rebase_best(self) -> None:
        """A resumed run's `best_eval` as the number its evaluations are compared with: `best.pt`
        evaluated again when the run now evaluates otherwise (other `eval_seeds`, or
        `eval_deterministic`), so that the best checkpoint is chosen between like numbers; -1 when
        its directory has no `best.pt` (a resume into a new directory), so that it gets one."""
        path = self.run_dir / "checkpoints" / "best.pt"
        if not path.exists():
            self.best_eval = -1.0
        elif self._eval_changed:
            saved = checkpoint.load(path, map_location=self.device, purpose="resume")
            policy = checkpoint.policy_from_record(saved["policy"], self.device, path)
            if getattr(policy, "decode", None) is not None:  # evaluated as this run now decodes
                policy.decode = self.cfg.policy.decode
            self.best_eval = self._evaluate(policy, int(saved["iteration"])).rate

    def close(self) -> None:
        """Release the envs (worker processes of `env.vector=async`) and the rollout workers (Ray)."""
        sampler = getattr(self, "sampler", None)
        if sampler is not None:
            sampler.close()
        self.env.close()
        eval_env = getattr(self, "eval_env", self.env)  # a trainer that failed while it was built has none
        if eval_env is not self.env:
            eval_env.close()

    # -- checkpoints --------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        reference = self.learner.reference
        return {
            "format_version": checkpoint.FORMAT_VERSION,
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "best_eval": self.best_eval,
            "config": self._config_record,
            "policy": checkpoint.policy_record(self.policy),
            "optimizer": self.learner.optimizer.state_dict(),
            "skipped_in_a_row": self.learner.skipped_in_a_row,  # non-finite steps since the last good one
            "reference": None if reference is None else reference.state_dict(),
            "critic": None if self.critic is None else self.critic.value.state_dict(),
            "start_replay": None if self.sampler.replay is None else self.sampler.replay.state_dict(),
            "eval": self._resumed_eval if self.last_eval is None else self.last_eval.to_json(),
            "seconds": self.run_seconds(),
            "eval_seconds": self.eval_seconds_before + self.eval_seconds,
            "torch_threads": torch.get_num_threads(),  # the update's reductions sum in this many parts
            # this iteration's scalars as far as the hooks before the checkpoint filled them: a resumed run logs
            # them again (TensorBoard), for a process that ended before its loggers wrote them
            "scalars": {**{k: float(v) for k, v in self._scalars.items()}, "time/run_s": self.run_seconds()},
            "initial_policy": self.pretrained,
            "hooks": self._hook_states(),
            "target": dict(self.target),
            # with the observation keys used (config: null = all), and a Gymnasium env's action bounds
            "env_identity": {**env_identity(self.cfg.env, self.env), **action_bounds(self.env)},
        }

    def _hook_keys(self) -> list[str]:
        """Each hook's key in a checkpoint: its class name, then `Name#2`, `Name#3`, ... for later
        hooks of one class (two instances used to share one entry, the second's)."""
        seen: dict[str, int] = {}
        keys = []
        for hook in self.hooks:
            name = type(hook).__name__
            seen[name] = seen.get(name, 0) + 1
            keys.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
        return keys

    def _hook_states(self) -> dict[str, Any]:
        states = {}
        for key, hook in zip(self._hook_keys(), self.hooks, strict=True):
            state = hook.state_dict()
            if state is not None:  # what a checkpoint keeps: checked as it is written, not when read back
                checkpoint.check_plain(state, f"the {key} hook's state_dict()")
                states[key] = state
        return states

    def checkpoint_path(self, name: str = "last") -> Path:
        return self.run_dir / "checkpoints" / f"{name}.pt"

    def save(self, name: str) -> Path:
        """`checkpoints/<name>.pt` of the state now. `last.pt` becomes the boundary as well: what
        a stop rolls back to is never older than the `last.pt` already written (a second Ctrl-C
        in the hooks after the `Checkpoints` hook used to write the iteration before over it)."""
        path = self.run_dir / "checkpoints" / f"{name}.pt"
        state = self.state()
        checkpoint.save_atomic(state, path)
        if name == "last":
            self._boundary, self._boundary_eval = _copied(state), self.last_eval
        return path

    def _restore(self, ckpt: dict[str, Any]) -> None:
        """The training state of `ckpt` (a resumed run's, or this run's last boundary): the time a
        run has taken is not part of it (`seconds_before` is set where a run resumes)."""
        reference = self.learner.reference
        checkpoint.check_resumable(ckpt, self.policy, reference is not None, self.critic is not None)
        self.policy.load_state_dict(ckpt["policy"]["state_dict"])
        self.learner.optimizer.load_state_dict(ckpt["optimizer"])
        if reference is not None:
            reference.load_state_dict(ckpt["reference"])
        if self.critic is not None:
            self.critic.value.load_state_dict(ckpt["critic"])
        if self.sampler.replay is not None:  # a checkpoint written before replay existed holds none
            self.sampler.replay.load_state_dict(ckpt.get("start_replay"))
        hook_states = ckpt.get("hooks") or {}  # checkpoints written before hooks kept state hold none
        keys = self._hook_keys()
        unclaimed = sorted(set(hook_states) - set(keys))
        if unclaimed:  # a hook the run had (an early stop, say) and this one has not: it trains on without it
            log.warning("the checkpoint holds the state of hooks this run does not have (%s): it goes on without "
                        "them; add them (hooks=[module:Class] or Trainer(hooks=...)) to keep them",
                        ", ".join(unclaimed))  # fmt: skip
        for name, hook in zip(keys, self.hooks, strict=True):
            if name in hook_states:
                try:
                    hook.load_state_dict(hook_states[name])
                except (KeyError, TypeError, ValueError) as err:  # a state of another layout
                    raise checkpoint.CheckpointError(f"{getattr(ckpt, 'path', 'the checkpoint')}: its state of the "
                                                     f"{name} hook cannot be restored: "
                                                     f"{checkpoint.one_line(err)}") from None  # fmt: skip
        self.iteration, self.env_steps = int(ckpt["iteration"]), int(ckpt["env_steps"])
        self.best_eval = float(ckpt["best_eval"])
        self.learner.skipped_in_a_row = int(ckpt.get("skipped_in_a_row") or 0)  # checkpoints before it: none


def _copied(obj: Any) -> Any:
    """`obj` with every tensor in it cloned (dicts, lists and tuples rebuilt; other values shared)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _copied(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_copied(v) for v in obj)
    return obj
