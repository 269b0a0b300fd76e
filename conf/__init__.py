"""The Hydra configs, installed as the package `grpo_robot.conf` (see pyproject.toml) so that
`grpo_robot.cli` finds them wherever the package is installed."""
