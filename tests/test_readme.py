"""The README's Python examples run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
RUN = '"runs/train/<date>_<time>"'  # a run's directory, in the examples that load one


def test_readme_python_examples_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 3
    loaded = 0
    for block in blocks:
        if RUN in block:  # made here: a short run on Reach
            from test_train import small_config

            from grpo_robot.trainer import Trainer

            if not (tmp_path / "run").exists():
                Trainer(small_config(iterations=1), tmp_path / "run").run()
            block, loaded = block.replace(RUN, repr(str(tmp_path / "run"))), loaded + 1
        namespace: dict = {}
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
        if "load_policy" in namespace:  # the trained policy's example played one episode to its end
            assert namespace["terminated"] or namespace["truncated"]
    assert loaded == 1
    assert namespace["success"].shape == (8, 16)  # the batched example's [G, N] outcome (the last block)
