"""Writes tests/data/minari/grpo-robot/fetch-push-expert-v0 with Minari itself.

Minari needs numpy >= 2, which the project's robosuite extra cannot have, so this runs in a
separate environment; the project reads the files with h5py (grpo_robot/datasets.py):

    python3 -m venv /tmp/minari_venv
    /tmp/minari_venv/bin/pip install "minari[create,hdf5]==0.5.4" "gymnasium-robotics>=1.4.2,<1.5" "mujoco>=3.3,<3.10"
    /tmp/minari_venv/bin/python tests/data/make_minari_fixture.py

10 episodes of FetchPush-v4 (reset seeds 0-9, 50 steps each) driven by the project's scripted
expert (grpo_robot/experts/fetch.py, loaded by file path so the project need not be installed)
with Gaussian noise of std 0.2 on its actions, every episode kept, as a user's recorded dataset would be.
"""

import importlib.util
import os
from pathlib import Path

import gymnasium as gym
import gymnasium_robotics
import minari
import numpy as np
from minari import DataCollector

HERE = Path(__file__).resolve().parent
os.environ["MINARI_DATASETS_PATH"] = str(HERE / "minari")
spec = importlib.util.spec_from_file_location("fetch_experts", HERE.parents[1] / "grpo_robot" / "experts" / "fetch.py")
experts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(experts)

gym.register_envs(gymnasium_robotics)
env = DataCollector(gym.make("FetchPush-v4"), record_infos=False)
rng = np.random.default_rng(0)
successes = 0
for seed in range(10):
    obs, info = env.reset(seed=seed)
    for _ in range(50):
        action = np.clip(experts.push(obs) + 0.2 * rng.standard_normal(4), -1, 1).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    successes += bool(info["is_success"])
dataset = env.create_dataset(
    dataset_id="grpo-robot/fetch-push-expert-v0",
    algorithm_name="scripted expert (grpo_robot.experts.fetch:push) + N(0, 0.2) action noise",
    author="grpo-robot",
    author_email="none@example.com",
    code_permalink="tests/data/make_minari_fixture.py",
    description="10 noisy scripted-expert episodes of FetchPush-v4, a test fixture for grpo_robot/datasets.py",
)
print(f"minari {minari.__version__}: {dataset.spec.total_episodes} episodes, {dataset.spec.total_steps} steps, "
      f"{successes} successful at the last step -> {dataset.spec.data_path}")
