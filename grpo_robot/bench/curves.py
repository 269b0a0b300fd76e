"""Evaluation success over a run, read from its TensorBoard events (`<run dir>/tb`)."""

from __future__ import annotations

from pathlib import Path

EVAL_TAG = "charts/eval_success"


def read_scalars(run_dir: Path) -> dict:
    """Every scalar series of the run, by tag: lists of events with `step`, `wall_time`, `value`."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(Path(run_dir) / "tb"))
    events.Reload()
    return {tag: events.Scalars(tag) for tag in events.Tags()["scalars"]}


def eval_curve(run_dir: Path) -> dict[str, list[float]]:
    """Evaluation success against env steps and seconds since the run's first event."""
    scalars = read_scalars(run_dir)
    points = scalars[EVAL_TAG]
    t0 = min(series[0].wall_time for series in scalars.values() if series)
    return {
        "env_steps": [p.step for p in points],
        "seconds": [p.wall_time - t0 for p in points],
        "success": [p.value for p in points],
    }


def first_reaching(points: list, target: float, start: float | None = None) -> tuple[int, float] | None:
    """(env steps, seconds since `start`, a wall time; default: the first point) at the first of the evaluation `points`
    (`read_scalars(...)[EVAL_TAG]`) with success >= `target`, or None. TensorBoard stores
    float32, so 190/200 reads back as 0.9499999881: values within float32 rounding of the target
    count as reaching it, as the run's own stop at `target_success` did."""
    for p in points:
        if p.value >= target - 1e-6:
            return p.step, p.wall_time - (points[0].wall_time if start is None else start)
    return None
