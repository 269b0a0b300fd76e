"""Scripted experts for outside tasks the project has presets for, written as a user would write
one for their own env: a function `(obs, info) -> action` in the env's own observation and action
units, used as `demos.expert=module:function` (grpo_robot/demos.py).

- `grpo_robot.experts.fetch:push` and `:pick_and_place`: Gymnasium-Robotics FetchPush-v4 and
  FetchPickAndPlace-v4.
- `grpo_robot.experts.robosuite_lift:lift`: robosuite Lift with a Panda arm and its default
  controller, through grpo_robot.envs.robosuite_env.

docs/results.md gives each one's success rate over 200 seeds (scripts/check_experts.py).
"""
