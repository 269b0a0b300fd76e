"""Command-line entry points (`scripts/*.py` and the `grpo-train` / `grpo-evaluate` commands).

Hydra composes the config; a value out of range ends the program with exit code 2 and one line
on stderr naming the key and what is allowed, before any environment is built.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from grpo_robot import rundir
from grpo_robot.config import (
    CollectDemosConfig,
    ConfigError,
    EvalConfig,
    PretrainConfig,
    TrainConfig,
    bool_override_error,
    config_dict,
    free_dict_overrides,
    register_configs,
    renamed_key_error,
    to_train_config,
    whole_number_overrides,
)

log = logging.getLogger(__name__)
CONF_DIR = str(files("grpo_robot.conf"))  # conf/ of the source tree, installed as grpo_robot.conf
# each command's config (conf/<name>.yaml) -> its schema
SCHEMAS = {"config": TrainConfig, "evaluate": EvalConfig, "collect_demos": CollectDemosConfig,
           "pretrain_bc": PretrainConfig}  # fmt: skip


def _fail(message: str, code: int = 2) -> None:
    """One line on stderr and exit: code 2 for bad input (before any work), 1 for a failure during it."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def _interrupt(signum: int, frame) -> None:
    from grpo_robot.signals import Interrupted

    raise Interrupted(signum)


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Ctrl-C and SIGTERM raise `Interrupted` inside the block, outside the work's own signal
    guards (which take over while they run, grpo_robot/signals.py): while a command composes its
    config, loads a checkpoint or builds its env, so that `_on_signal` can end it in one line (a
    SIGTERM there used to end it without a word, a Ctrl-C with a traceback)."""
    from grpo_robot.signals import CAUGHT

    previous = {signum: signal.signal(signum, _interrupt) for signum in CAUGHT}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _sweep_words() -> str:
    """In a multirun's job: which job a signal stopped, and what of the sweep it leaves."""
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return ""
    job = HydraConfig.get()
    return (f" (the sweep stopped at its job {job.job.num}, {job.runtime.output_dir}: the jobs before it are "
            "whole, the ones after it did not run)")  # fmt: skip


@contextmanager
def _on_signal(doing: str, cleanup: Callable[[], str | None] | None = None, job: bool = True) -> Iterator[None]:
    """A signal in the block ends the command with one line, `stopped by SIGINT <doing>`, and exit
    code 128 + its number; `cleanup` runs first and may return other words for `doing`. `job`: the
    block is a job's (in a multirun, the line names it and says what of the sweep is left)."""
    from grpo_robot.signals import Interrupted, interrupted_by

    try:
        yield
    except (Interrupted, SystemError) as err:  # Ray's `ray.get` while its workers start: a SystemError
        stop = interrupted_by(err)
        if stop is None:
            raise
        words = (cleanup() if cleanup else None) or doing
        _fail(f"stopped by {stop} {words}{_sweep_words() if job else ''}", code=128 + stop.signum)


# the config keys the command line's overrides changed (set by `_run` when it composes the config)
_touched: set[str] = set()
# the run directory this command made (`_run_dir_overrides`), empty or not yet written by the run
_made: set[Path] = set()


def _resume_config(cfg: DictConfig):
    """The config of `resume=<run>`: the checkpoint's, with the keys this command line's overrides
    touched taken from it (`check_same_run` refuses the ones that would change what is trained)
    -> (the config, the checkpoint)."""
    from omegaconf import OmegaConf

    from grpo_robot.resume import resumed_config

    ckpt = _resume_checkpoint(cfg.resume)
    mine = OmegaConf.to_container(cfg, resolve=True)
    return resumed_config(ckpt["config"], mine, _touched | {"resume"}), ckpt


# the checkpoint of `resume=<run>`, read once per command (`_resume_checkpoint`): the checks before
# the run, the run's config and the trainer's state come from the same bytes
_resumed: dict[str, Any] = {}


def _resume_checkpoint(resume: str):
    """`checkpoint.load(resume, purpose="resume")`, read once: a second call for the same file,
    unchanged since (inode, size, modification time), gets the same checkpoint back; a file
    replaced in between is read again."""
    from grpo_robot import checkpoint

    path = checkpoint.resolve(resume)
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    except OSError:  # load names what is wrong with it
        key = None
    if key is None or _resumed.get("key") != key:
        _resumed.clear()  # one at a time: a sweep's jobs each resume their own
        _resumed.update(key=key, checkpoint=checkpoint.load(path, purpose="resume"))
    return _resumed["checkpoint"]


# the exit codes of the jobs of this multirun that failed: each is told in its line, and the sweep
# goes on to its other jobs; the command exits with the first code once every job ran
_job_failures: list[int] = []
# each job's evaluation in an `evaluate.py -m checkpoint=a,b,...` sweep, summarized across them at its end
_evaluations: list[dict] = []


def _job_fail(message: str, code: int) -> None:
    """`_fail` for a training job: in a multirun, the line (with the job's directory) and on to the
    next job; a single run exits."""
    from hydra.types import RunMode

    if HydraConfig.get().mode != RunMode.MULTIRUN:
        _fail(message, code)
    print(f"error: {message} (job {HydraConfig.get().runtime.output_dir})", file=sys.stderr)
    _job_failures.append(code)


def _train(cfg: DictConfig) -> float | None:
    run_dir = HydraConfig.get().runtime.output_dir
    with _on_signal("before training started; no iteration ran", lambda: _unstarted_words(Path(run_dir))):
        trainer = _trainer(cfg, run_dir)
    if trainer is None:
        return None
    return _train_with(trainer)


def _unstarted_words(run_dir: Path) -> str | None:
    """A signal before training started: the run directory goes if it holds nothing of the run's."""
    _remove_unstarted(run_dir)
    return None if run_dir.exists() else "before training started; nothing written"


def _trainer(cfg: DictConfig, run_dir: str):
    """The run's `Trainer`, or None: the run finished already, or it is refused (one line)."""
    from grpo_robot.trainer import Trainer

    try:
        train_cfg, ckpt = to_train_config(cfg), None
        if train_cfg.resume:
            from grpo_robot.resume import check_same_run

            train_cfg, ckpt = _resume_config(cfg)
            check_same_run(ckpt["config"], train_cfg, f"resume={train_cfg.resume}")
            done, budget = int(ckpt["iteration"]), train_cfg.max_env_steps
            if done >= train_cfg.iterations or (budget is not None and int(ckpt["env_steps"]) >= budget):
                over = done >= train_cfg.iterations
                limit = f"iterations={train_cfg.iterations}" if over else f"max_env_steps={budget}"
                print(
                    f"{train_cfg.resume} finished already: {done} iterations, {int(ckpt['env_steps']):,} env steps "
                    f"({limit}); nothing to do. To train longer, resume with a larger {limit.split('=')[0]}=..."
                )
                return None
            target = ckpt.get("target") or {}
            if target.get("reached") and target.get("target") == train_cfg.target_success:
                print(f"{train_cfg.resume} finished already: it reached target_success={target['target']:g} at "
                      f"iteration {target.get('iteration')} ({target.get('success', 0):.1%} on held-out seeds); "
                      "nothing to do. To train on, resume with a higher target_success=... or target_success=null")
                return None
        from grpo_robot.config import unused_settings

        for setting in unused_settings(train_cfg):
            log.warning("%s (set by the preset or the command line)", setting)
        # the checkpoint read for the checks above, handed on and let go here (the trainer copies it in)
        _resumed.clear()
        return Trainer(train_cfg, run_dir, resumed=ckpt)
    except (ValueError, FileNotFoundError) as err:  # ConfigError, or an init_from/demos/env that does not fit
        _remove_unstarted(Path(run_dir))
        _job_fail(str(err), 2)
        return None


def _train_with(trainer) -> float | None:
    from grpo_robot.checkpoint import WriteError
    from grpo_robot.hooks import Refused

    try:
        summary = trainer.run()
    except Refused as err:  # a hook refused it before any work (a logger's service, an env that cannot film)
        _remove_unstarted(trainer.run_dir)
        _job_fail(str(err), 2)
        return None
    except (WriteError, ValueError) as err:  # the run directory cannot be written or locked
        _job_fail(str(err), 1)
        return None
    finally:
        trainer.close()
    result = trainer.last_eval
    resumed = summary["seconds_total"] > summary["seconds"]  # the counts are the run's: so are the seconds
    here = f" ({summary['seconds']:.0f} s in this process)" if resumed else ""
    print(f"trained {summary['iterations']} iterations, {summary['env_steps']:,} env steps in "
          f"{summary['seconds_total']:.0f} s{here}{_stop_reason(summary['stopped'], trainer.cfg)}")  # fmt: skip
    if result is not None:
        print(f"eval on {len(result.success)} held-out seeds: {result.summary()}")
    print(f"run directory: {summary['run_dir']}")
    last = trainer.checkpoint_path("last")
    resume = f"continue with: python scripts/train.py {rundir.shell_override('resume', summary['run_dir'])}"
    if summary["stopped"] == "signal":
        import signal

        saved = f"saved iteration {summary['iterations']} to {last}" if last.exists() else "nothing saved"
        print(f"stopped by {summary['signal']}: {saved}; {resume}", file=sys.stderr)
        sys.exit(128 + int(getattr(signal, summary["signal"])))
    if summary["stopped"] == "error":
        saved = f"the last completed iteration ({summary['iterations']}) is in {last}; {resume}" if last.exists() \
            else "nothing was saved"  # fmt: skip
        _job_fail(f"{summary['error']} ({saved})", 1)
    return None if result is None else result.rate


def _stop_reason(stopped: str | None, cfg: TrainConfig) -> str:
    """Why a run ended before its `iterations`, for the console's last line (summary.json's "stopped")."""
    if stopped in ("time_limit_min", "max_env_steps"):
        return f" (stopped at its budget, {stopped}={getattr(cfg, stopped):g})"
    if stopped == "target_success":
        return f" (stopped at target_success={cfg.target_success:g})"
    if stopped not in (None, "iterations", "signal", "error"):
        return f" (stopped by the {stopped} hook)"
    return ""


def _evaluation_setup(cfg: DictConfig):
    """evaluate.py's checkpoint, its env (and the env that films, with `video`) and its policy, each
    checked: (path, device, ckpt, train_cfg, policy, env, film_env), or one line and exit 2."""
    from grpo_robot import checkpoint
    from grpo_robot.config.validate import validate_eval
    from grpo_robot.device import resolve_device
    from grpo_robot.environment import make_eval_env

    try:
        validate_eval(cfg)
        path = checkpoint.resolve(cfg.checkpoint)
        device = resolve_device(cfg.device)
        ckpt = checkpoint.load(path, map_location=device, purpose="evaluate")
        train_cfg: TrainConfig = to_train_config(ckpt["config"])
        if cfg.outcome is not None:  # success judged otherwise than the run judged it
            train_cfg = dataclasses.replace(train_cfg, env=dataclasses.replace(train_cfg.env, outcome=cfg.outcome))
        validate_eval(cfg, train_cfg)  # n_seeds worlds of its env fit in memory
        policy = checkpoint.policy_from_record(ckpt["policy"], device)
        if cfg.decode is not None:
            policy.decode = cfg.decode
        worlds = cfg.worlds
        if worlds is None and ckpt.get("kind") == "bc":  # its config's algo never chosen: pretrain_bc.py's worlds
            worlds = PretrainConfig.eval_worlds
        env = make_eval_env(train_cfg, cfg.n_seeds, worlds=worlds)
        try:  # the env as built now still observes what the policy was trained on
            checkpoint.check_env(ckpt, train_cfg.env, f"checkpoint={path}", env)
        except ValueError:
            env.close()
            raise
    except (ValueError, FileNotFoundError) as err:
        _fail(str(err))
    film_env = None
    if cfg.video:  # built, and rendering a frame, before the evaluation: an env that cannot film is refused first
        from grpo_robot import video

        try:
            filmed = train_cfg if not cfg.video_kwargs else dataclasses.replace(train_cfg, env=dataclasses.replace(
                train_cfg.env, kwargs={**train_cfg.env.kwargs, **OmegaConf.to_container(cfg.video_kwargs)}))
            film_env = video.make_video_env(filmed, cfg.video)
        except (ValueError, RuntimeError) as err:
            env.close()
            _fail(str(err))
    return path, device, ckpt, train_cfg, policy, env, film_env


def _evaluate(cfg: DictConfig) -> None:
    from grpo_robot import checkpoint
    from grpo_robot.evaluation import eval_labels, evaluate
    from grpo_robot.gym_vector import EnvFailure
    from grpo_robot.seeding import STREAM_EVAL, eval_seeds, stream_seed
    from grpo_robot.signals import Interrupted, SignalGuard

    # a signal while the checkpoint loads or the envs are built: one line (the evaluation has its own guard)
    with _on_signal("before the evaluation started; nothing written"):
        path, device, ckpt, train_cfg, policy, env, film_env = _evaluation_setup(cfg)
    try:
        with SignalGuard() as guard, guard.abandonable():  # Ctrl-C or SIGTERM: one line, not a traceback
            result = evaluate(env, policy, eval_seeds(cfg.n_seeds, cfg.seeds), device, cfg.deterministic,
                              stream_seed(cfg.seed, 0, STREAM_EVAL), train_cfg.env.outcome == "final_step")  # fmt: skip
    except (EnvFailure, Interrupted) as err:
        if film_env is not None:
            film_env.close()
        if isinstance(err, Interrupted):
            _fail(f"stopped by {err} during the evaluation; nothing written", code=128 + err.signum)
        _fail(str(err), code=1)  # every world of a chunk failed: nothing to score
    finally:
        env.close()
    mode, output, folder = eval_outputs(cfg, path)
    # which state of the checkpoint was measured: a later save to the same name (a resumed run's) is another
    record = {"checkpoint": str(path.resolve()), "iteration": int(ckpt.get("iteration") or 0),
              "env_steps": int(ckpt.get("env_steps") or 0), "mode": mode}  # fmt: skip
    record.update(eval_labels(env, train_cfg.env, cfg.seeds, cfg.deterministic))
    if not cfg.deterministic:
        record["seed"] = int(cfg.seed)  # the sampling seed: the same seed samples the same episodes
    elif getattr(policy, "decode", None) is not None:
        record["decode"] = policy.decode  # a tokenized policy's deterministic action
    record.update(result.to_json())
    from grpo_robot.machine import describe

    # what it ran on: a policy's actions round by the CPU's kind (its tanh's form), so a rate repeats there
    record["machine"] = describe()
    try:
        checkpoint.write_text_atomic(output, json.dumps(record, indent=1))
    except OSError as err:
        _fail(str(err), code=1)
    task, judged = record["task"], OUTCOME_WORDS[train_cfg.env.outcome]
    print(f"{task}, {mode}, {cfg.seeds} seeds, success {judged}, {path}: {result.summary()}")
    if not record["seeded"]:
        print(f"warning: env.group_start=clone: this env ignores its seed, so the {cfg.seeds} seeds do not decide "
              "the episodes: another evaluation draws other ones (and its rate differs by chance)",
              file=sys.stderr)  # fmt: skip
    print(f"per-seed outcomes: {output}")
    _evaluations.append({"checkpoint": str(path), "task": task, "mode": mode, "seeds": cfg.seeds,
                         "n": len(result.success), "rate": float(result.rate), "successes": int(result.success.sum()),
                         "group": _sweep_group(ckpt, train_cfg, path), "run": _run_of(path)})  # fmt: skip
    if cfg.video:
        if not cfg.video_dir:  # the default folder: a fresh one, not mixed with an earlier evaluation's films
            from grpo_robot.rundir import fresh_file

            folder = fresh_file(folder)
        with _on_signal(f"while filming; the evaluation is written ({output}), and every video written is whole"):
            _film(cfg, train_cfg, policy, result, device, folder, film_env)


OUTCOME_WORDS = {"any_step": "at any step", "final_step": "at the final step"}  # env.outcome, for the console


def _sweep_group(ckpt: dict, train_cfg: TrainConfig, path: Path) -> dict:
    """What a sweep's checkpoints must share to be summarized together: the kind of checkpoint (a
    clone, a run's last.pt or best.pt) and the run's settings (`across_checkpoints`)."""
    from grpo_robot.checkpoint import is_bc
    from grpo_robot.resume import flatten

    return {"kind": "clone" if is_bc(ckpt) else path.stem,
            "config": {k: str(v) for k, v in flatten(config_dict(train_cfg)).items()}}  # fmt: skip


def _run_of(path: Path) -> str:
    """The run a checkpoint belongs to: the folder above its `checkpoints/`, else the file itself."""
    path = path.resolve()
    return str(path.parent.parent if path.parent.name == "checkpoints" else path)


def across_checkpoints(evaluations: list[dict]) -> list[str]:
    """Lines that summarize a sweep's evaluations of two or more checkpoints (training seeds, say)
    of one task, mode, seed range and count, one kind of checkpoint (last.pt, best.pt, a clone) and
    one setting: checkpoints of runs whose configs differ in a key that changes what is trained or
    how it is measured (`env.outcome`, a learning rate; not a seed or a budget) get a line each, as
    `plot.py` draws them. Each gives the mean success over the checkpoints with a 95% interval
    (`stats.mean_rate_interval`), their interquartile mean and each rate. Each checkpoint's own
    Wilson interval says how well its seeds measure it; this one how much the checkpoints differ.
    A run named twice (its directory and its last.pt) counts once, and a line says so."""
    import numpy as np

    from grpo_robot.plots import _same_training, iqm
    from grpo_robot.stats import mean_rate_interval

    groups: dict[tuple, list[dict]] = {}
    for e in evaluations:
        groups.setdefault((e["task"], e["mode"], e["seeds"], e["n"], e["group"]["kind"]), []).append(e)
    lines = []
    for (task, mode, seeds, n, kind), items in groups.items():
        keys = sorted({k for e in items for k in e["group"]["config"]})
        varying = [k for k in keys if not _same_training(k) and len({e["group"]["config"].get(k) for e in items}) > 1]
        settings: dict[tuple, list[dict]] = {}
        for e in items:
            settings.setdefault(tuple(e["group"]["config"].get(k) for k in varying), []).append(e)
        for values, members in settings.items():
            runs: dict[str, dict] = {}
            for e in members:
                if e["run"] in runs:
                    lines.append(f"note: {e['checkpoint']} is of the run of {runs[e['run']]['checkpoint']}: counted "
                                 "once across checkpoints")  # fmt: skip
                else:
                    runs[e["run"]] = e
            if len(runs) < 2:
                continue
            rates = np.array([e["rate"] for e in runs.values()])
            low, high = mean_rate_interval(rates, sum(e["successes"] for e in runs.values()), n * len(rates))
            setting = "".join(f"{k}={v}, " for k, v in zip(varying, values, strict=True))
            lines.append(f"across {len(rates)} {kind} checkpoints ({setting}{task}, {mode}, {n} {seeds} seeds each): "
                         f"mean success {rates.mean():.1%} [{low:.1%}, {high:.1%}] (95%, Student's t over "
                         f"checkpoints), IQM {iqm(rates):.1%}{' (the mean, under 4)' if len(rates) < 4 else ''}; "
                         f"each: {', '.join(f'{r:.1%}' for r in rates)}")  # fmt: skip
    return lines


def eval_outputs(cfg, path: Path) -> tuple[str, Path, Path]:
    """`scripts/evaluate.py`'s mode (`deterministic`, `deterministic_median`, `stochastic_seed3`,
    `deterministic_final_step` with `outcome=`),
    per-seed JSON and video folder for the checkpoint at `path`: the seeds and the mode name the
    outputs next to the checkpoint (`last_eval_test_200_deterministic.json`), so that evaluations
    that differ do not replace each other's."""
    mode = "deterministic" if cfg.deterministic else f"stochastic_seed{cfg.seed}"
    if cfg.deterministic and cfg.decode is not None:
        mode += f"_{cfg.decode}"
    if getattr(cfg, "outcome", None) is not None:  # success judged as asked, not as the run judged it
        mode += f"_{cfg.outcome}"
    name = f"{path.stem}_eval_{cfg.seeds}_{cfg.n_seeds}_{mode}.json"
    output = Path(cfg.output) if cfg.output else path.with_name(name)
    videos = f"{path.stem}_videos" if mode == "deterministic" else f"{path.stem}_videos_{mode}"
    if cfg.seeds != "test":
        videos += f"_{cfg.seeds}"
    return mode, output, Path(cfg.video_dir) if cfg.video_dir else path.with_name(videos)


def _film(cfg: DictConfig, train_cfg, policy, result, device, folder: Path, env) -> None:
    """`video=N`: N of the evaluated seeds (successes and failures) played again and filmed, in
    `env` (made by `video.make_video_env` before the evaluation; closed here)."""
    from grpo_robot import video
    from grpo_robot.checkpoint import WriteError
    from grpo_robot.gym_vector import EnvFailure

    seeds = video.pick_seeds(result, cfg.video, cfg.video_outcomes)
    if train_cfg.env.group_start == "clone":
        print(f"warning: videos: {video.NEW_EPISODES}", file=sys.stderr)
    if not len(seeds):
        env.close()
        print(f"videos: no {cfg.video_outcomes} among the {len(result.seeds)} evaluated episodes to film")
        return
    try:
        episodes, paths, _ = video.film_evaluated(env, policy, result, seeds, device, cfg.render, folder,
                                                 cfg.deterministic, train_cfg.env.outcome == "final_step")  # fmt: skip
    except OSError as err:  # WriteError names the file; a folder that cannot be made is named here
        _fail(str(err if isinstance(err, WriteError) else WriteError(folder, err)), code=1)
    except EnvFailure as err:  # a world that stopped rendering (or stepping) while filmed
        _fail(f"videos: {err}", code=1)
    finally:
        env.close()
    wins = sum(e.success for e in episodes)
    print(f"videos of {len(episodes)} episodes ({wins} successes, {len(episodes) - wins} failures):")
    for p in paths:
        print(f"  {p}")


def _collect_demos(cfg: DictConfig) -> None:
    from grpo_robot.config import env_name, file_stem
    from grpo_robot.config.validate import validate_collect
    from grpo_robot.demos import collect_demos, collect_expert_demos

    try:
        with _on_signal("before collecting started; nothing written"):  # its env's module is imported, checked
            env_cfg = validate_collect(cfg)
    except ValueError as err:
        _fail(str(err))
    d = cfg.demos
    if d.seed is None:  # null: 0 here (training's null is the run's seed)
        d.seed = 0
    unused = {"task": cfg.env is not None, "nthread": not env_cfg.task}  # env= decides / a Gymnasium env's own
    for key in sorted(k for k, ignored in unused.items() if ignored and k in _touched):
        why = f"env= names the env ({env_name(env_cfg)})" if key == "task" else "a built-in task's physics threads"
        log.warning("%s=%s does nothing here: %s", key, cfg[key], why)
    from grpo_robot.signals import Interrupted, SignalGuard

    try:
        with SignalGuard() as guard, guard.abandonable():  # Ctrl-C or SIGTERM: one line, not a traceback
            if env_cfg.task:
                data, stats = collect_demos(env_cfg.task, d.episodes, d.noise, d.seed, d.max_attempts,
                                            nthread=cfg.nthread or env_cfg.nthread, horizon=env_cfg.horizon,
                                            outcome=env_cfg.outcome)  # fmt: skip
            else:
                from tqdm import tqdm

                with tqdm(total=d.episodes, desc="kept", unit="episode", disable=not sys.stderr.isatty()) as bar:
                    data, stats = collect_expert_demos(env_cfg, d.expert, d.episodes, d.noise, d.seed,
                                                       d.max_attempts, lambda kept, tried: bar.update(kept - bar.n))
    except (RuntimeError, ValueError) as err:
        _fail(str(err))
    except Interrupted as stop:
        _fail(f"stopped by {stop} while collecting; nothing written", code=128 + stop.signum)
    name = file_stem(env_name(env_cfg))
    # a default name never replaces an earlier dataset (another noise or seed, which the name leaves out)
    output = Path(cfg.output) if cfg.output else rundir.fresh_file(f"demos/{name}_{d.episodes}.npz")
    from grpo_robot.checkpoint import WriteError, write_text_atomic

    try:
        path = data.save(output)
    except OSError as err:
        _fail(str(WriteError(output, err) if not isinstance(err, WriteError) else err), code=1)
    seeded = data.seeds[data.seeds >= 0]
    summary = {
        "dataset": str(path),
        "env": data.env,
        "source": data.source,
        "episodes": data.n_episodes,
        "steps": int(data.lengths.sum()),
        "noise": data.noise,
        "seeds": [int(seeded[0]), int(seeded[-1])] if len(seeded) else None,
        **stats.to_json(),
    }
    try:
        write_text_atomic(path.with_suffix(".json"), json.dumps(summary, indent=1))
    except OSError as err:
        _fail(str(err), code=1)
    print(
        f"{env_name(env_cfg)}: kept {stats.kept} of {stats.attempted} expert episodes (noise {d.noise}), "
        f"{summary['steps']} steps, mean length {stats.mean_length:.1f} -> {path}"
    )


def _pretrain_inputs(cfg: DictConfig):
    """pretrain_bc.py's env config (given, or the one the .npz records), policy and BC settings,
    the env to check the dataset against, and the dataset, each checked: (env_cfg, policy_cfg,
    bc_cfg, train_cfg, env, data), or one line and exit 2."""
    from omegaconf import OmegaConf

    from grpo_robot.config import PolicyConfig, TrainConfig, env_config, validate_env
    from grpo_robot.config.store import env_config_dict
    from grpo_robot.config.validate import check_memory, check_mirror, validate_pretrain
    from grpo_robot.datasets import load_demos
    from grpo_robot.demos import DemoDataset
    from grpo_robot.environment import make_env

    try:
        env_cfg = validate_pretrain(cfg)
        policy_cfg: PolicyConfig = OmegaConf.to_object(cfg.policy)
        bc_cfg = OmegaConf.to_object(cfg.bc)
        if bc_cfg.seed is None:  # null: 0 here (training's null is the run's seed)
            bc_cfg.seed = 0
        if env_cfg is not None:
            pass
        elif str(cfg.dataset).endswith(".npz"):  # the env it records, with the settings given (+env.horizon=...)
            given = OmegaConf.to_container(cfg.env, resolve=True) if cfg.env is not None else {}
            recorded = env_config_dict(env_config(DemoDataset.load(cfg.dataset).env_config))
            kwargs = {**(recorded.get("kwargs") or {}), **(given.get("kwargs") or {})}  # +env.kwargs.k=v adds
            env_cfg = env_config({**recorded, **given, **({"kwargs": kwargs} if kwargs else {})})
        else:
            raise ConfigError(f"dataset={cfg.dataset}: say which env it is for, as training does (env=<preset> or "
                              "env=gym env.id=...)")  # fmt: skip
        validate_env(env_cfg)
        check_mirror(policy_cfg, env_cfg)
        train_cfg = TrainConfig(env=env_cfg, policy=policy_cfg, bc=bc_cfg, eval_seeds=max(cfg.eval_seeds, 1))
        check_memory(train_cfg, eval_seeds=cfg.eval_seeds, eval_key="eval_seeds", train=False)  # the .npz's env too
        env = make_env(env_cfg, 1)  # the spaces and layout the dataset must match
        data = load_demos(cfg.dataset, env_cfg, env, key="dataset", filter_key=cfg.filter_key)
    except (ValueError, FileNotFoundError) as err:
        _fail(str(err))
    return env_cfg, policy_cfg, bc_cfg, train_cfg, env, data


def _pretrain_bc(cfg: DictConfig) -> None:
    from grpo_robot import checkpoint
    from grpo_robot.bc import BCDiverged, checkpoint_from_bc, clone
    from grpo_robot.device import resolve_device
    from grpo_robot.environment import make_eval_env
    from grpo_robot.evaluation import evaluate
    from grpo_robot.seeding import eval_seeds
    from grpo_robot.signals import Interrupted, SignalGuard

    with _on_signal("before behaviour cloning started; nothing saved"):  # the dataset loads, the env is built
        env_cfg, policy_cfg, bc_cfg, train_cfg, env, data = _pretrain_inputs(cfg)
        device = resolve_device(cfg.device)
    try:
        with SignalGuard() as guard, guard.abandonable():  # Ctrl-C or SIGTERM: one line, not a traceback
            policy, result = clone(data, policy_cfg, bc_cfg, device, env=env_cfg)
    except BCDiverged as err:
        _fail(str(err), code=1)
    except Interrupted as stop:
        _fail(f"stopped by {stop} during behaviour cloning; nothing saved", code=128 + stop.signum)
    score = "held-out action MSE" if result.val_episodes else "training loss"  # no episode held out: no MSE
    print(
        f"behaviour cloning on {result.train_episodes} episodes ({result.val_episodes} held out): "
        f"{score} {result.best_val_score:.4f} at step {result.best_step} of {result.steps}, {result.seconds:.1f} s"
    )
    from grpo_robot.gym_vector import EnvFailure

    env.close()
    dataset = Path(str(cfg.dataset).rstrip("/"))
    if dataset.is_file():  # next to the file; for a dataset directory or id, in the working directory
        default = dataset.with_name(f"{dataset.stem}_bc_{policy_cfg.type}.pt")
    else:
        default = Path(f"{dataset.name}_bc_{policy_cfg.type}.pt")
    output = Path(cfg.output) if cfg.output else rundir.fresh_file(default)  # a default never replaces a clone

    def save(evaluation) -> None:
        try:
            record = checkpoint_from_bc(policy, train_cfg, str(cfg.dataset), result, evaluation, data.identity)
            checkpoint.save_atomic(record, output)
        except (OSError, ValueError) as err:  # a full disk, or a clone with non-finite weights
            _fail(str(err), code=1)

    failed, eval_env = None, None
    try:
        # One guard from the first save on: a signal while the clone is written is held until the
        # evaluation starts, and one while its env is built abandons it like one during it.
        with SignalGuard() as guard:
            save(None)  # the clone is kept whatever becomes of its evaluation (a signal, a failing env)
            if cfg.eval_seeds == 0:
                print(f"checkpoint: {output}")
                return
            with guard.abandonable():  # Ctrl-C or SIGTERM abandons the evaluation at once
                eval_env = make_eval_env(train_cfg, cfg.eval_seeds, worlds=cfg.eval_worlds)
                evaluation = evaluate(eval_env, policy, eval_seeds(cfg.eval_seeds), device, True, None,
                                      env_cfg.outcome == "final_step")  # fmt: skip
        print(f"{eval_env.name}, deterministic, on {cfg.eval_seeds} held-out seeds: {evaluation.summary()}")
        save(evaluation)
    except EnvFailure as err:  # the clone stays saved, without an evaluation
        failed = str(err)
    except Interrupted as stop:
        print(f"checkpoint: {output}")
        _fail(f"stopped by {stop} during the held-out evaluation; the clone is saved without one: {output}",
              code=128 + stop.signum)  # fmt: skip
    finally:
        if eval_env is not None:
            eval_env.close()
    print(f"checkpoint: {output}")
    if failed is not None:
        _fail(f"the held-out evaluation failed: {failed}; the clone is saved without one: {output}", code=1)


def compose_train_config(*overrides: str):
    """The `TrainConfig` that `scripts/train.py <overrides>` would train, composed from `conf/`
    without running anything (for scripts and tests)."""
    return to_train_config(compose_config(*overrides))


def prepared_overrides(overrides: list[str], schema: type = TrainConfig) -> list[str]:
    """A command line's overrides (flags pass through) as Hydra should read them: whole numbers
    as ints where `schema` has an int, a free dict's keys added (`++env.kwargs.k=v`); a
    `ConfigError` in one line for a renamed key or a bool given anything but true or false."""
    prepared = free_dict_overrides(whole_number_overrides(overrides, schema))
    refused = renamed_key_error(prepared) or bool_override_error(prepared, schema)
    if refused:
        raise ConfigError(refused)
    return prepared


def checked_train_config(*overrides: str):
    """The `TrainConfig` that `scripts/train.py <overrides>` trains, with the checks that command makes
    before it runs (renamed keys, bools, a dict's new keys, Hydra's errors, the schema's values);
    a `ConfigError` in one line otherwise. For scripts that run trainings of their own."""
    from grpo_robot.config import validate
    from grpo_robot.config.errors import hydra_error_line

    prepared = prepared_overrides(list(overrides))
    try:
        cfg = compose_train_config(*prepared)
    except Exception as err:  # noqa: BLE001  (Hydra's and OmegaConf's errors, several lines each)
        if isinstance(err, ValueError) and type(err).__module__.startswith("grpo_robot."):
            raise
        try:
            base = compose_config()  # a misspelled key's parent lists its keys from it
        except Exception:  # noqa: BLE001
            base = None
        raise ConfigError(hydra_error_line(err, base, prepared)) from None
    validate(cfg)
    return cfg


def compose_config(*overrides: str) -> DictConfig:
    """`conf/config.yaml` composed with `overrides`, untyped (see `compose_train_config`)."""
    from hydra import compose, initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=whole_number_overrides(list(overrides)))


CHECKED_COMBINATIONS = 64  # a multirun's combinations composed and checked before it starts (then each value)


def _precompose(config_name: str, overrides: list[str]) -> list[DictConfig]:
    """Compose `conf/<config_name>.yaml` with `overrides` as Hydra will, once per combination of
    a multirun's sweep values -> the configs, hydra node included. Of a sweep of more than
    `CHECKED_COMBINATIONS` jobs, the first ones and then every value of every swept key (the
    others at their first value), so that no value goes unchecked. A Hydra error propagates."""
    import copy
    import itertools
    import math

    register_configs()  # the schemas the configs' defaults name (also when no command ran before)

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
               else [o.input_line] for o in parsed]  # fmt: skip
    combos = list(itertools.islice(itertools.product(*choices), CHECKED_COMBINATIONS))
    if math.prod(len(c) for c in choices) > CHECKED_COMBINATIONS:
        first = [c[0] for c in choices]
        each = dict.fromkeys((*first[:i], v, *first[i + 1 :]) for i, c in enumerate(choices) for v in c[1:])
        seen = set(combos)
        combos += [c for c in each if c not in seen]  # those the first ones hold are composed once
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        # copies: Hydra reuses the nodes of one composition in the next
        return [copy.deepcopy(compose(config_name, overrides=list(c), return_hydra_config=True)) for c in combos]


# the keys of a command that name one file or folder for its output (unset: named by the job itself)
OUTPUT_KEYS = {"evaluate": ("output", "video_dir"), "pretrain_bc": ("output",), "collect_demos": ("output",)}


def _check_shared_outputs(config_name: str, configs: list[DictConfig]) -> None:
    """`ConfigError` where the jobs of a sweep would write one `output=` file (or `video_dir=`)
    named on the command line: each job replaced the one before's, and every job said it had
    written it."""
    from collections import Counter

    for key in OUTPUT_KEYS.get(config_name, ()):
        counts = Counter(str(c.get(key)) for c in configs if c.get(key))
        shared = [value for value, n in counts.items() if n > 1]
        if shared:
            raise ConfigError(f"{key}={shared[0]} is the same for {counts[shared[0]]} jobs of this sweep, and each "
                              f"would replace the one before's: leave {key} unset (each job names its own), or "
                              "run one job per value")  # fmt: skip


def _resumed_env_overrides(args: list[str]) -> list[str]:
    """With `resume=`, the env keys a resume may change (`env.vector`, `env.step_timeout_s`,
    `env.nthread`) given as `++env.<key>=...`: the command composes over the default env preset,
    which lacks a Gymnasium env's keys, while they apply to the run's own env."""
    if not any(a.startswith("resume=") for a in args):
        return args
    from grpo_robot.resume import SAFE_KEYS

    env_keys = {k for k in SAFE_KEYS if k.startswith("env.")}
    return [f"++{a}" if a.split("=", 1)[0] in env_keys and "=" in a else a for a in args]


def _validate_resumed(composed: DictConfig, overrides: list[str]) -> None:
    """A resume's command line checked as the config it gives: the run's own (its checkpoint's),
    with the keys the command line touched (`check_same_run` later refuses those it may not change)."""
    from omegaconf import OmegaConf

    from grpo_robot.config import validate
    from grpo_robot.resume import resumed_config

    try:
        ckpt = _resume_checkpoint(composed.resume)
    except FileNotFoundError as err:
        raise ConfigError(str(err)) from None
    touched = _touched_keys(overrides, composed) | {"resume"}
    validate(resumed_config(ckpt["config"], OmegaConf.to_container(_without_hydra(composed), resolve=True), touched))


def _touched_keys(overrides: list[str], composed: DictConfig) -> set[str]:
    """The config leaves that `overrides` set: a key's own leaves, every leaf of a group's package
    (`env=push_cube`: env.*), and for `experiment=` the keys its file sets (and the groups it overrides)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from grpo_robot.resume import flatten

    leaves = list(flatten(OmegaConf.to_container(_without_hydra(composed))))
    groups = set(composed.hydra.runtime.choices.keys())

    def under(prefix: str) -> set[str]:
        return {k for k in leaves if k == prefix or k.startswith(f"{prefix}.")}

    # where Hydra looks for a preset: conf/, then the folders of hydra.searchpath (--config-dir)
    folders = [Path(CONF_DIR)] + [f for p in composed.hydra.get("searchpath") or [] if (f := _search_folder(str(p)))]

    def experiment_keys(name: str) -> set[str]:
        path = next((p for f in folders if (p := f / "experiment" / f"{name}.yaml").is_file()), None)
        if path is None:  # on a search path of another scheme: no keys counted as set
            return set()
        with path.open() as f:
            spec = OmegaConf.to_container(OmegaConf.load(f))
        keys = {k for k in flatten({k: v for k, v in spec.items() if k != "defaults"}) if k in leaves}
        for entry in spec.get("defaults") or []:
            if isinstance(entry, dict):
                for group in entry:
                    keys |= under(group.split("/")[-1])  # `override /policy: tokenized_factorized`
            elif entry != "_self_":
                keys |= experiment_keys(entry)  # a preset built on another: `- push_cube_bc`
        return keys

    touched: set[str] = set()
    for o in OverridesParser.create().parse_overrides(overrides):
        key = o.get_key_element().lstrip("+~")
        if key.startswith("hydra."):
            continue
        if key == "experiment" and o.value() is not None:
            names = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.value()]  # -m experiment=a,b
            for name in names:
                touched |= experiment_keys(name)
        else:
            touched |= under(key) if key in leaves or key in groups or any(k.startswith(f"{key}.") for k in leaves) \
                else set()  # fmt: skip
    return touched


def _search_folder(entry: str):
    """The folder of a `hydra.searchpath` entry, to read presets from: a path (`file://DIR` or no
    scheme), or a package's folder (`pkg://package.module`, as a `Traversable`); None for another
    scheme or a package that does not import (Hydra has then refused the entry, or reads it itself)."""
    if entry.startswith("pkg://"):
        from importlib import resources

        try:
            return resources.files(entry.removeprefix("pkg://").strip("/").replace("/", "."))
        except (ImportError, TypeError, ValueError):
            return None
    if "://" in entry and not entry.startswith("file://"):
        return None
    return Path(entry.removeprefix("file://"))


def _without_hydra(cfg: DictConfig) -> DictConfig:
    """A copy of `cfg` without its hydra node, still typed by its schema (`to_train_config` then
    builds it without checking every value again)."""
    import copy

    from omegaconf import open_dict

    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.pop("hydra", None)
    return cfg


def _run_dir_overrides(cfg: DictConfig, overrides: list[str], multirun: bool) -> list[str]:
    """Claim and lock the directory a training run (or a multirun's sweep) writes into, before
    Hydra writes anything there -> the overrides that point Hydra at it (grpo_robot/rundir.py)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    keys = {o.get_key_element().lstrip("+~") for o in parsed}
    _made.clear()
    if multirun:
        if "hydra.run.dir" in keys:  # a multirun's jobs go under hydra.sweep.dir
            raise rundir.RunDirError("hydra.run.dir is not used with -m: the jobs of a multirun go under "
                                     "hydra.sweep.dir; set that instead")  # fmt: skip
        if cfg.get("resume") and _resume_run_dir(str(cfg.resume)) is not None:
            raise rundir.RunDirError(f"resume={cfg.resume} continues a run in its own directory, which -m does not: "
                                     "resume each run on its own, without -m")  # fmt: skip
        swept = [o.get_key_element().lstrip("+~") for o in parsed if o.is_sweep_override()]
        if not str(cfg.hydra.sweep.dir).strip():
            raise rundir.RunDirError("hydra.sweep.dir='' is invalid: must name a directory for the runs")
        explicit = "hydra.sweep.dir" in keys
        sweep = rundir.claim(cfg.hydra.sweep.dir, unique=not explicit)
        held = rundir.runs_under(sweep) if explicit else None
        if held:  # its jobs' directories would be reused: each job's files overwritten by a new run's
            raise rundir.RunDirError(f"hydra.sweep.dir={str(sweep)!r} holds runs already ({held}); choose another "
                                     "directory, or continue each run with resume=<its directory>")  # fmt: skip
        extra = [f"hydra.sweep.dir={rundir.override_value(sweep)}"]
        if "hydra.sweep.subdir" not in keys and set(swept) - {"seed"}:  # one directory per job, named by its values
            groups = set(cfg.hydra.runtime.choices.keys()) if "runtime" in cfg.hydra else set()
            parts = [f"{k}=${{hydra:runtime.choices.{k}}}" if k in groups else f"{k}=${{{k}}}" for k in swept]
            extra.append("hydra.sweep.subdir=" + rundir.override_value(",".join(parts), interpolations=True))
        return extra
    if cfg.get("resume"):
        run_dir = _resume_run_dir(str(cfg.resume))
        if run_dir is not None and "hydra.run.dir" in keys and Path(cfg.hydra.run.dir).resolve() != run_dir:
            raise rundir.RunDirError(
                f"hydra.run.dir={cfg.hydra.run.dir} cannot be combined with resume={cfg.resume}, which continues in "
                f"its own directory {run_dir}; drop hydra.run.dir, or resume from a copy of its checkpoint file kept "
                "outside it (a new directory then)")  # fmt: skip
        if run_dir is not None:  # continue in the run's own directory, its first config kept in .hydra/
            rundir.lock(run_dir, "resume")
            n = 1 + len(list((run_dir / ".hydra").glob("resume-*")))
            return [f"hydra.run.dir={rundir.override_value(run_dir)}", f"hydra.output_subdir=.hydra/resume-{n}"]
    explicit = "hydra.run.dir" in keys
    existed = Path(cfg.hydra.run.dir).is_dir()
    missing = [p for p in Path(cfg.hydra.run.dir).resolve().parents if not p.exists()]  # runs/train/ on a first run
    run_dir = rundir.claim(cfg.hydra.run.dir, unique=not explicit)
    rundir.lock(run_dir)
    if not (explicit and existed):  # made by this command: removed again if the run cannot start
        _made.add(run_dir.resolve())
        _made.update(missing)  # and the folders made to hold it, where they are left empty
    held = rundir.holds_run(run_dir) if explicit else None
    if held:
        again = rundir.shell_override("resume", run_dir)
        raise rundir.RunDirError(f"hydra.run.dir={str(run_dir)!r} holds a run already ({held}); continue it with "
                                 f"{again}, or choose another directory")  # fmt: skip
    return [f"hydra.run.dir={rundir.override_value(run_dir)}"]


def _remove_unstarted(run_dir: Path) -> None:
    """Remove the run directory this command made when the run is refused before it wrote anything
    of its own there (an env whose check needs it built: no time limit, an unknown id, a probe
    that fails): only Hydra's config, the log and the lock, so no empty run is left behind."""
    from hydra.types import RunMode

    run_dir = run_dir.resolve()
    made = run_dir in _made or HydraConfig.get().mode == RunMode.MULTIRUN  # a multirun's job: Hydra made it
    if not made or {p.name for p in run_dir.iterdir()} - {".hydra", rundir.LOCK_NAME, "train.log"}:
        return
    import shutil

    for handler in logging.getLogger().handlers:  # the log file's, closed before its file goes
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == run_dir:
            logging.getLogger().removeHandler(handler)
            handler.close()
    rundir.release(run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    parent = run_dir.parent
    while parent in _made and parent.is_dir() and not any(parent.iterdir()):  # runs/train/ this command made
        parent.rmdir()
        parent = parent.parent
    if HydraConfig.get().mode == RunMode.MULTIRUN:  # and the folders a `/` in a swept value nested it in
        sweep, parent = Path(HydraConfig.get().sweep.dir).resolve(), run_dir.parent
        while parent != sweep and sweep in parent.parents and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


def _remove_bookkeeping(sweep: Path) -> None:
    """A multirun of evaluate, collect_demos or pretrain_bc writes its files where it is told (next
    to the checkpoint, `demos/`, `output=`): the sweep folder Hydra makes holds only its
    `multirun.yaml` and empty job folders, and goes, with the parents it leaves empty below the
    working directory (`multirun/<date>/<time>`)."""
    import shutil

    cwd = Path.cwd().resolve()
    if sweep == cwd or sweep in cwd.parents:  # hydra.sweep.dir=. or above: never the working directory
        return
    if not sweep.is_dir() or any(p.is_file() and p.name != "multirun.yaml" for p in sweep.rglob("*")):
        return
    shutil.rmtree(sweep, ignore_errors=True)
    parent = sweep.parent
    while parent != cwd and cwd in parent.parents and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _resume_run_dir(resume: str) -> Path | None:
    """The run directory that `resume=` names (a run directory, or its `checkpoints/last.pt`), or
    None for another checkpoint file (a new directory then: resuming from `best.pt` or a kept
    `iter_N.pt` in the run's own directory would write an older iteration over its `last.pt`)."""
    path = Path(resume)
    if path.is_dir():
        return path.resolve()
    if path.is_file() and path.parent.name == "checkpoints" and path.name == "last.pt":
        return path.parent.parent.resolve()
    return None


def _check_train(cfg) -> None:
    """`validate`, then a `resume` checkpoint's state, or an `init_from` checkpoint's fit to the
    config's policy and env (the checks that need no env built), so that none leaves a run
    directory behind."""
    from grpo_robot.config import validate

    validate(cfg)
    if cfg.resume:  # (torch only now: a config refused above is refused before torch loads)
        from grpo_robot import checkpoint

        try:
            _resume_checkpoint(cfg.resume)
        except FileNotFoundError as err:
            raise checkpoint.CheckpointError(f"resume={cfg.resume}: {err}") from None
    if cfg.init_from and not cfg.resume:
        from grpo_robot.checkpoint import check_init_from

        check_init_from(cfg)
    if cfg.pretrain and cfg.demos.path and not cfg.resume:
        _check_demos_path(cfg)


def _check_demos_path(cfg) -> None:
    """`demos.path` before any directory is made: it must exist, and a demo `.npz` must record the
    configured env (an outside format is checked once the env is built, which converts it)."""
    from grpo_robot.datasets import load_demos, resolve

    try:
        path = resolve(cfg.demos.path)
    except FileNotFoundError as err:
        raise ConfigError(f"demos.path={cfg.demos.path}: {err}") from None
    if path.suffix == ".npz":
        load_demos(path, cfg.env, None, filter_key=cfg.demos.filter_key)


def _validator(config_name: str):
    """The check of a composed config of `conf/<config_name>.yaml` (hydra node removed)."""
    from grpo_robot.config.validate import validate_collect, validate_eval, validate_pretrain

    return {
        "config": lambda c: _check_train(to_train_config(c)),
        "evaluate": validate_eval,
        "collect_demos": validate_collect,
        "pretrain_bc": validate_pretrain,
    }[config_name]


def _checked_first(args: list[str]) -> bool:
    """Whether a command line is overrides alone (and `-m`): `_run` composes and checks those before
    Hydra runs; Hydra's other flags go to Hydra unchecked."""
    return all(not a.startswith("-") or a in ("-m", "--multirun") for a in args)


def config_dir_as_override(args: list[str]) -> list[str]:
    """Hydra's `--config-dir DIR` (`-cd DIR`, `--config-dir=DIR`) as the override it amounts to,
    `hydra.searchpath=[file://DIR]`: a folder of one's own presets on Hydra's search path. As an
    override it takes the path of every other run: its config composed and checked before any
    work, its run directory claimed. Beside Hydra's other flags (`--help`, `--cfg`, `--info`,
    `--config-name`), which skip those checks, the flag is left to Hydra, whose own handling
    they need (the folder's presets in `--help`, a primary config in the folder)."""
    spellings = ("-cd", "--config-d", "--config-di", "--config-dir")  # argparse takes a long flag's prefixes
    out, dirs = [], []
    rest = iter(args)
    for arg in rest:
        flag, eq, value = arg.partition("=")
        if flag not in spellings:
            out.append(arg)
        elif eq:
            dirs.append(value)
        elif (value := next(rest, None)) is None:
            raise ValueError(f"{arg} needs a directory after it")
        else:
            dirs.append(value)
    # Hydra's other flags (--help, --cfg, --config-name, ...) skip the checks before a run, and some of them need
    # Hydra's own --config-dir (the primary config in the folder, the folder's presets in --help): left to Hydra
    if not dirs or not _checked_first(out):
        return args
    if len(dirs) > 1:
        raise ValueError(f"--config-dir is given {len(dirs)} times ({', '.join(dirs)}): give one folder")
    if any(a.lstrip("+~").startswith("hydra.searchpath=") for a in out):
        raise ValueError("--config-dir and hydra.searchpath are both given: give one of them")
    return [*out, search_path_override(dirs[0])]


def search_path_override(config_dir: str) -> str:
    """The override that puts the folder `config_dir` (of one's own presets) on Hydra's search path;
    a ValueError (one line) if it is no folder."""
    folder = Path(config_dir).expanduser().resolve()
    if not folder.is_dir():
        raise ValueError(f"--config-dir={config_dir} is invalid: must be a directory of config groups "
                         "(e.g. experiment/<name>.yaml)")  # fmt: skip
    return f"hydra.searchpath=[{rundir.override_value('file://' + str(folder))}]"


# what a signal outside the stretches that name their own words leaves behind (`_on_signal`)
WHOLE_FILES = "before it finished; every file it wrote is whole (each is written whole or not at all)"


def _run(config_name: str, task) -> None:
    """Compose `conf/<config_name>.yaml` with Hydra (overrides from the command line) and run `task`.

    The config is composed and validated here first, so that a bad value or a Hydra error is one
    line and exit code 2 before Hydra creates any directory; a training run then claims and locks
    its run directory (grpo_robot/rundir.py). Hydra's own flags (--help, --cfg, ...) skip this.
    Ctrl-C or SIGTERM ends the command in one line wherever it lands (`_on_signal`)."""
    with _signals_interrupt(), _on_signal(WHOLE_FILES, job=False):
        _compose_and_run(config_name, task)


def _compose_and_run(config_name: str, task) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from grpo_robot.config.errors import hydra_error_line

    register_configs()
    try:
        sys.argv = [sys.argv[0], *config_dir_as_override(sys.argv[1:])]
    except ValueError as err:
        _fail(str(err))
    try:
        wholes = prepared_overrides(sys.argv[1:], SCHEMAS[config_name])
    except ValueError as err:
        _fail(str(err))
    if config_name == "config":
        wholes = _resumed_env_overrides(wholes)
    args = [a if a.startswith("-") else b for a, b in zip(sys.argv[1:], wholes, strict=True)]
    sys.argv = [sys.argv[0], *args]
    multirun = any(a in ("-m", "--multirun") for a in args)
    if _checked_first(args):
        overrides = [a for a in args if not a.startswith("-")]
        try:
            configs = _precompose(config_name, overrides)
            sweeps = [
                o.input_line for o in OverridesParser.create().parse_overrides(overrides) if o.is_sweep_override()
            ]
            for composed in configs:
                if config_name == "config" and composed.get("resume") and not multirun:
                    _validate_resumed(composed, overrides)  # the run's config, not the defaults', with them
                else:
                    _validator(config_name)(_without_hydra(composed))
            _check_shared_outputs(config_name, configs)
        except Exception as err:  # noqa: BLE001
            if isinstance(err, ValueError) and type(err).__module__.startswith("grpo_robot."):
                _fail(str(err))  # this project's one-line errors (ConfigError, ...)
            # Hydra's and OmegaConf's errors, several lines each; a misspelled key's parent lists its keys, as the
            # command line's choices of config groups (env=gym, experiment=...) compose it, else as the defaults do
            choices = [o for o in overrides if re.fullmatch(r"[\w/]+=[^,\[\]{}]+", o) and "." not in o.split("=")[0]]
            base = None
            for attempt in (choices, []):
                try:
                    base = _precompose(config_name, attempt)[0]
                    break
                except Exception:  # noqa: BLE001
                    continue
            _fail(hydra_error_line(err, base))
        if sweeps and not multirun:
            _fail(f"{sweeps[0]} is a sweep (several values): add -m to run one job per value, or give one value")
        _touched.clear()
        _touched.update(_touched_keys(overrides, configs[0]))
        if config_name == "config":
            try:
                flags = [a for a in args if a in ("-m", "--multirun")]  # first: Hydra reads overrides after it
                rest = [a for a in args if a not in flags]
                sys.argv = [sys.argv[0], *flags, *rest, *_run_dir_overrides(configs[0], overrides, multirun)]
            except (ValueError, FileNotFoundError) as err:
                _fail(str(err))
    _job_failures.clear()
    _evaluations.clear()
    sweeps: set[Path] = set()

    def job(cfg: DictConfig):
        if config_name != "config" and HydraConfig.get().sweep.dir:
            sweeps.add(Path(HydraConfig.get().sweep.dir).resolve())
        return task(cfg)

    try:
        hydra.main(config_path=CONF_DIR, config_name=config_name, version_base="1.3")(job)()
    finally:
        for sweep in sweeps if multirun else ():
            _remove_bookkeeping(sweep)
    for line in across_checkpoints(_evaluations) if multirun else ():
        print(line)
    if _job_failures:  # a multirun's failed jobs, each told in its own line
        sys.exit(_job_failures[0])


def train_main() -> None:
    _run("config", _train)


def evaluate_main() -> None:
    _run("evaluate", _evaluate)


def collect_demos_main() -> None:
    _run("collect_demos", _collect_demos)


def pretrain_bc_main() -> None:
    _run("pretrain_bc", _pretrain_bc)
