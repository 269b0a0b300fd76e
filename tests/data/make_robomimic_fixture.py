"""Writes tests/data/robomimic_lift_2demos.hdf5: two robosuite Lift (Panda) episodes of the
project's scripted expert in robomimic's HDF5 layout, with h5py.

robomimic itself does not install next to the project here (it needs torchvision, which has no CPU
build on this machine's package index), so the file is written with h5py following robomimic's
documented dataset structure: `data` (attributes `total`, `env_args` as JSON with `env_name`,
`type` 1 = robosuite, `env_kwargs`), one group `data/demo_<i>` per episode (attribute
`num_samples`) with `actions`, `rewards`, `dones`, `states` (MuJoCo state per step), `obs/<key>`
and `next_obs/<key>`, and `mask/train`, `mask/valid` listing demo names. Observation keys are
robomimic's low-dimensional names: `object` (robosuite's `object-state`), `robot0_eef_pos`,
`robot0_eef_quat`, `robot0_gripper_qpos`.

    python tests/data/make_robomimic_fixture.py
"""

import json
from pathlib import Path

import h5py
import numpy as np

from grpo_robot.envs.robosuite_env import RobosuiteEnv
from grpo_robot.experts.robosuite_lift import LiftExpert

KEYS = {"object": "object-state", "robot0_eef_pos": "robot0_eef_pos", "robot0_eef_quat": "robot0_eef_quat",
        "robot0_gripper_qpos": "robot0_gripper_qpos"}  # fmt: skip
OUT = Path(__file__).resolve().parent / "robomimic_lift_2demos.hdf5"

env = RobosuiteEnv(env_name="Lift", robots="Panda", obs_keys=list(KEYS.values()))
expert = LiftExpert()
with h5py.File(OUT, "w") as f:
    data = f.create_group("data")
    total = 0
    for i in range(2):
        obs, info = env.reset(seed=i)
        expert.reset()
        steps, states = [], []
        while True:
            action = expert.get_action(obs)
            states.append(env.robosuite_env.sim.get_state().flatten())
            new, reward, terminated, truncated, info = env.step(action)
            steps.append((obs, new, action, float(info["is_success"])))
            obs = new
            if info["is_success"] or terminated or truncated or len(steps) >= 100:
                break
        demo = data.create_group(f"demo_{i}")
        demo.attrs["num_samples"] = len(steps)
        demo.create_dataset("actions", data=np.array([s[2] for s in steps]))
        demo.create_dataset("rewards", data=np.array([s[3] for s in steps]))
        demo.create_dataset("dones", data=np.array([s[3] for s in steps], dtype=np.int64))
        demo.create_dataset("states", data=np.array(states))
        for group, which in (("obs", 0), ("next_obs", 1)):
            g = demo.create_group(group)
            for name, key in KEYS.items():
                g.create_dataset(name, data=np.array([s[which][key] for s in steps]))
        total += len(steps)
    data.attrs["total"] = total
    data.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1, "env_kwargs": {
        "robots": ["Panda"], "control_freq": 20, "has_renderer": False, "has_offscreen_renderer": False,
        "use_camera_obs": False, "reward_shaping": False}})  # fmt: skip
    mask = f.create_group("mask")
    mask.create_dataset("train", data=np.array([b"demo_0"]))
    mask.create_dataset("valid", data=np.array([b"demo_1"]))
print(f"{OUT}: 2 demos, {total} steps")
