"""Collect scripted-expert demonstrations. Config: conf/collect_demos.yaml; e.g.

python scripts/collect_demos.py task=LiftCube demos.episodes=10
python scripts/collect_demos.py task=PushCube demos.episodes=50 demos.noise=0.1 output=demos/push50.npz
"""

from grpo_robot.cli import collect_demos_main

if __name__ == "__main__":
    collect_demos_main()
