"""Evaluation success over a run, read from its TensorBoard events (`<run dir>/tb`)."""

from __future__ import annotations

from pathlib import Path

EVAL_TAG = "charts/eval_success"
RUN_TIME_TAG = "time/run_s"  # the run's own seconds at each logged step, over all its processes


def read_scalars(run_dir: Path) -> dict:
    """Every scalar series of the run, by tag: lists of events with `step`, `wall_time`, `value`
    (every event: TensorBoard's default keeps a sample of 10000 per tag)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(Path(run_dir) / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: events.Scalars(tag) for tag in events.Tags()["scalars"]}


def curve(scalars: dict, tag: str = EVAL_TAG) -> dict[str, list[float]]:
    """`tag`'s values against env steps and seconds. The seconds are the run's own time at each
    point (`time/run_s`, logged with every step): from the start of training (cloning included),
    summed over the processes of a resumed run and without the wait between them, the clock of
    `summary.json`'s time to target. Runs logged before that scalar existed: wall-clock since the
    run's first event."""
    points = scalars[tag]
    run_time = {}
    for p in scalars.get(RUN_TIME_TAG, []):  # a step logged more than once: its last (the evaluation's)
        run_time[p.step] = max(run_time.get(p.step, 0.0), p.value)
    if all(p.step in run_time for p in points):
        seconds = [run_time[p.step] for p in points]
    else:
        t0 = min(series[0].wall_time for series in scalars.values() if series)
        seconds = [p.wall_time - t0 for p in points]
    return {"env_steps": [p.step for p in points], "seconds": seconds, "success": [p.value for p in points]}


def eval_curve(run_dir: Path) -> dict[str, list[float]]:
    """Evaluation success against env steps and the run's seconds (`curve`)."""
    return curve(read_scalars(run_dir))


def first_reaching(points: dict[str, list[float]], target: float) -> tuple[int, float] | None:
    """(env steps, seconds) at the first point of a `curve` with success >= `target`, or None.
    TensorBoard stores float32, so 190/200 reads back as 0.9499999881: values within float32
    rounding of the target count as reaching it, as the run's own stop at `target_success` did."""
    for steps, seconds, value in zip(points["env_steps"], points["seconds"], points["success"], strict=True):
        if value >= target - 1e-6:
            return steps, seconds
    return None
