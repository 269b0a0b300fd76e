"""Benchmarks and reports of grpo-robot, as a library; the commands in scripts/ parse arguments
and call these modules.

- `limit`: episode plans for `BatchedEnv`, recording what its physics received, and replaying
  that open-loop through `mujoco.rollout` alone (the physical limit).
- `cpu`: the load other processes put on the machine, and a guard that redoes disturbed repeats.
- `envs`: throughput of the batched backend against the limit and Gymnasium's SyncVectorEnv.
- `gym_envs`: what the Gymnasium backend costs against the env stepped alone.
- `profile`: update throughput and the split of one training iteration.
- `sweep`: training runs to a target success over algorithms, starts and seeds.
- `results`: the table and plots of a sweep's results.
- `curves`: evaluation curves read from a run's TensorBoard events.
- `sb3`: Stable-Baselines3 PPO as the outside reference of a sweep (needs the `bench` extra).
- `report`: the table of finished training runs.
- `compare`: success after a fixed env-step budget per policy type and algorithm preset.
- `bc_demos`: behaviour-cloning success against the number of demonstrations.
- `experts`: success of the scripted experts.
- `markdown`: the table rows and success-rate cells these modules print.

Importing a module here loads only what it needs; Stable-Baselines3, matplotlib and
TensorBoard's reader load when used.
"""
