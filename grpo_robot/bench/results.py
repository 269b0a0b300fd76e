"""What a sweep found (the records of `sweep.run`): a Markdown table per start and algorithm,
and success curves against env steps and wall-clock."""

from __future__ import annotations

import statistics
from pathlib import Path


def train_table(results: list[dict], target: float) -> str:
    """Markdown: per start and algorithm, the seeds that reached the target, median env steps and
    training seconds to it (evaluations excluded), and the final success rates."""
    lines = [f"| start | algorithm | reached {target:.0%} | env steps to target (median) | "
             "training s to target (median) | per seed: s to target | final success | training env steps/s |",
             "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |"]  # fmt: skip
    keys = sorted({(r["start"], r["algo"]) for r in results})
    for start, algo in keys:
        runs = sorted((r for r in results if (r["start"], r["algo"]) == (start, algo)), key=lambda r: r["seed"])
        hit = [r for r in runs if r["target"]["reached"]]
        steps = statistics.median(r["target"]["env_steps"] for r in hit) if hit else None
        secs = statistics.median(r["target"]["train_seconds"] for r in hit) if hit else None
        per_seed = ", ".join(f"{r['target']['train_seconds']:.0f}" if r["target"]["reached"] else "-" for r in runs)
        finals = ", ".join(f"{r['final_success']:.0%}" for r in runs)
        rate = sum(r["env_steps"] for r in runs) / sum(r["seconds"] - r["eval_seconds"] for r in runs)
        lines.append(f"| {start} | {algo} | {len(hit)}/{len(runs)} | {'-' if steps is None else f'{steps:,.0f}'} | "
                     f"{'-' if secs is None else f'{secs:.0f}'} | {per_seed} | {finals} | {rate:,.0f} |")  # fmt: skip
    return "\n".join(lines)


def plot_curves(results: list[dict], path: Path, target: float) -> None:
    """Eval success against env steps and against wall-clock: mean over seeds, shaded min-max.
    A run that stopped at the target keeps its last value afterwards."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for start, algo in sorted({(r["start"], r["algo"]) for r in results}):
        runs = [r for r in results if (r["start"], r["algo"]) == (start, algo)]
        for ax, x_key in zip(axes, ("env_steps", "seconds"), strict=True):
            end = max(r["curve"][x_key][-1] for r in runs)
            grid = np.linspace(0, end, 200)
            ys = np.stack([np.interp(grid, r["curve"][x_key], r["curve"]["success"]) for r in runs])
            line = ax.plot(grid, ys.mean(0), label=f"{algo} ({start})")[0]
            ax.fill_between(grid, ys.min(0), ys.max(0), color=line.get_color(), alpha=0.15)
    task = results[0]["task"]
    for ax, label in zip(axes, ("env steps", "wall-clock s (evaluations included)"), strict=True):
        ax.axhline(target, color="grey", lw=0.8, ls="--")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("eval success (mean action, held-out seeds)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{task}: mean over seeds, shaded min-max")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
