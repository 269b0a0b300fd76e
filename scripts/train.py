"""Train a policy with GRPO. Config: conf/config.yaml; e.g.

python scripts/train.py
python scripts/train.py env=lift_cube algo.group_size=8
python scripts/train.py -m seed=0,1,2
"""

from grpo_robot.cli import train_main

if __name__ == "__main__":
    train_main()
