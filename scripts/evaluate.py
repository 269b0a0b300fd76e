"""Success rate of a checkpoint on held-out seeds, with a 95% Wilson interval:

python scripts/evaluate.py checkpoint=runs/train/<date>/checkpoints/best.pt n_seeds=200
"""

from grpo_robot.cli import evaluate_main

if __name__ == "__main__":
    evaluate_main()
