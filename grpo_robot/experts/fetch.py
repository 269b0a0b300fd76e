"""Scripted experts for Gymnasium-Robotics' Fetch tasks (FetchPush-v4, FetchPickAndPlace-v4).

Both read the env's Dict observation: `observation` starts with the gripper position (0:3), the
object position (3:6), the object relative to the gripper (6:9) and the two finger openings
(9:11); `desired_goal` is where the object must go. The action is a gripper displacement (scaled by
the env to 5 cm per unit per step) and a finger command (+1 opens, -1 closes). Neither keeps state
between steps: each decides its phase from what it observes, so it recovers when the object slips.
"""

from __future__ import annotations

import numpy as np

GAIN = 10.0  # action per metre of error: full speed beyond 10 cm


def _move(grip: np.ndarray, target: np.ndarray, fingers: float) -> np.ndarray:
    return np.append(np.clip(GAIN * (target - grip), -1.0, 1.0), fingers)


def push(obs: dict, info: dict | None = None) -> np.ndarray:
    """FetchPush: get behind the block on the line from the goal through the block, low, then push
    along that line."""
    o, goal = obs["observation"], obs["desired_goal"]
    grip, block = o[0:3], o[3:6]
    line = goal[:2] - block[:2]
    remaining = float(np.linalg.norm(line))
    u = line / max(remaining, 1e-6)
    behind = block[:2] - 0.06 * u
    offset = grip[:2] - block[:2]
    along = float(offset @ u)  # < 0 behind the block
    across = abs(float(offset[0] * u[1] - offset[1] * u[0]))
    low = grip[2] < block[2] + 0.02
    if low and -0.09 < along < -0.01 and across < 0.02:  # in place: push through the block to the goal
        return _move(grip, np.append(goal[:2] + 0.02 * u, block[2]), -1.0)
    if np.linalg.norm(grip[:2] - behind) > 0.015:  # go there from above, so the block is not knocked
        high = block[2] + 0.08
        if grip[2] < block[2] + 0.05 and np.linalg.norm(offset) < 0.08:
            return _move(grip, np.append(grip[:2], high), -1.0)  # rise first when close to the block
        return _move(grip, np.append(behind, high), -1.0)
    return _move(grip, np.append(behind, block[2]), -1.0)  # descend behind it


def pick_and_place(obs: dict, info: dict | None = None) -> np.ndarray:
    """FetchPickAndPlace: above the block with open fingers, down, close, then carry it to the goal
    (which may be in the air)."""
    o, goal = obs["observation"], obs["desired_goal"]
    grip, block, rel, fingers = o[0:3], o[3:6], o[6:9], o[9] + o[10]
    if np.linalg.norm(rel) < 0.02:  # the block is between the fingers
        if fingers < 0.06:  # closed on it: carry
            return _move(grip, goal, -1.0)
        return _move(grip, block, -1.0)  # close
    if np.linalg.norm(rel[:2]) > 0.01:  # above it, fingers open
        return _move(grip, block + np.array([0.0, 0.0, 0.05]), 1.0)
    return _move(grip, block, 1.0)  # down to it
