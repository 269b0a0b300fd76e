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


def test_every_test_the_docs_cite_exists():
    """README, docs/, conf/ and the code's comments name the tests that hold a claim to account
    (`test_faults.py::test_...`, `tests/test_mirror.py`): each named file and function exists (a
    renamed or merged test left two rows of docs/reliability.md citing nothing)."""
    root = README.parent
    texts = [README, *sorted((root / "docs").glob("*.md")), *sorted((root / "conf").rglob("*.yaml")),
             *(p for folder in ("grpo_robot", "scripts", "envs") for p in sorted((root / folder).rglob("*.py")))]
    cited: set[tuple[str, str | None]] = set()
    for path in texts:
        text = path.read_text()
        cited |= {(f, name) for f, name in re.findall(r"\b(test_\w+\.py)::(\w+)", text)}
        cited |= {(f, None) for f in re.findall(r"\btests/(test_\w+\.py)\b", text)}
    assert len({f for f, _ in cited}) >= 20 and sum(name is not None for _, name in cited) >= 100
    tests = root / "tests"

    def found(f: str, name: str | None) -> bool:
        return (tests / f).is_file() and (name is None or bool(
            re.search(rf"^\s*(def|class) {name}\b", (tests / f).read_text(), re.M)))  # fmt: skip

    missing = sorted(f"{f}::{name}" if name else f for f, name in cited if not found(f, name))
    assert not missing, missing


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives `path`'s headings: lower case, punctuation but `-` and `_` dropped,
    spaces as `-`, a repeated one numbered (`-1`, `-2`); none from inside a code block."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    code = False
    for line in path.read_text().splitlines():
        code ^= line.startswith("```")
        heading = None if code else re.match(r"#+\s+(.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).replace("`", "").strip().lower()).replace(" ", "-")
            out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return out


def test_every_link_between_the_docs_leads_somewhere():
    """Each relative link of README and docs/ names a file that exists and, with `#...`, a heading
    of it (a heading renamed in docs/results.md leaves the README's link to it dead)."""
    files = [README, *sorted((README.parent / "docs").glob("*.md"))]
    links = [(f, t) for f in files for t in re.findall(r"\]\(([^)\s]+)\)", f.read_text())
             if not re.match(r"[a-z]+:", t)]  # fmt: skip
    assert len(links) >= 100
    dead = []
    for source, target in links:
        name, _, anchor = target.partition("#")
        dest = source.parent / name if name else source
        if not dest.exists() or anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            dead.append(f"{source.name}: {target}")
    assert not dead, dead
