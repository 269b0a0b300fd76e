"""The README's Python examples run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        namespace: dict = {}
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    assert namespace["success"].shape == (8, 16)  # the batched example's [G, N] outcome
