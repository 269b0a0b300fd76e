"""Autoregressive tokenized decoding, side by side: `TokenizedPolicy.sample` (the trunk and the
factorized logits once per decode, the conditional head once per dimension) against scoring
every dimension's pass from the observation, as the decoder did before. Both draw the same tokens.

    python scripts/benchmark_decode.py [--batch 512] [--bins 256] [--hidden 256] [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

from grpo_robot.machine import one_line  # grpo_robot first: it sets the OpenMP wait policy torch reads
from grpo_robot.policies import TokenizedPolicy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--obs-dim", type=int, default=22)
    parser.add_argument("--action-dim", type=int, default=4)
    parser.add_argument("--bins", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    import torch

    torch.manual_seed(0)
    policy = TokenizedPolicy(args.obs_dim, args.action_dim, bins=args.bins, head="autoregressive",
                             hidden_sizes=[args.hidden, args.hidden]).eval()  # fmt: skip
    obs = torch.randn(args.batch, args.obs_dim)

    def every_pass() -> torch.Tensor:
        generator, tokens = torch.Generator().manual_seed(0), torch.zeros(args.batch, args.action_dim, dtype=torch.long)
        for d in range(args.action_dim):
            logits = policy.logits(obs, tokens)
            tokens[:, d] = policy._choose(logits[:, d : d + 1], generator, False)[0][:, 0]  # (tokens, actions)
        return tokens

    def cached() -> torch.Tensor:
        return policy.sample(obs, torch.Generator().manual_seed(0))[0]

    times: dict[str, list[float]] = {"every pass from the observation": [], "trunk once (sample)": []}
    with torch.no_grad():
        assert torch.equal(every_pass(), cached())  # the same tokens
        for _ in range(args.repeats):  # interleaved, so drift hits both alike
            for name, decode in zip(times, (every_pass, cached), strict=True):
                start = time.perf_counter()
                decode()
                times[name].append(time.perf_counter() - start)
    print(f"# {one_line()}; {torch.get_num_threads()} torch threads")
    print(f"# B={args.batch}, D={args.action_dim}, K={args.bins}, trunk {args.hidden}x{args.hidden}, "
          f"median of {args.repeats}")  # fmt: skip
    print("| decoding | ms per decode |\n| --- | ---: |")
    medians = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    for name, ms in medians.items():
        print(f"| {name} | {ms:.2f} |")
    before, after = medians.values()
    print(f"speed-up: {before / after:.2f}x")


if __name__ == "__main__":
    main()
