"""Packaging and CI files: pinned actions, the promised build matrix, and the local gate.

GitHub runs the workflows; these tests keep their promises checkable here: every action pinned
by commit, the test matrix over three systems and CPython 3.11-3.14, abi3 wheels plus a
free-threaded build and an sdist, and `.ci/run` calling the README's test command and checking
the built wheel.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", re.MULTILINE)
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def workflow(name: str) -> str:
    return (WORKFLOWS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["ci.yml", "release.yml"])
def test_every_action_is_pinned_by_commit_and_names_its_release(name: str) -> None:
    uses = USES.findall(workflow(name))
    assert uses, f"{name} uses no actions"
    for action, rest in uses:
        assert PINNED.match(action), f"{name}: {action} is not pinned by a 40-hex commit"
        assert re.search(r"#\s*v\d", rest), f"{name}: {action} has no '# vX' release comment"


def test_the_same_action_is_pinned_to_one_commit_everywhere() -> None:
    pins: dict[str, set[str]] = {}
    for name in ("ci.yml", "release.yml"):
        for action, _ in USES.findall(workflow(name)):
            repo, commit = action.split("@")
            pins.setdefault(repo, set()).add(commit)
    assert {repo: commits for repo, commits in pins.items() if len(commits) > 1} == {}


def matrix_list(text: str, key: str) -> list[str]:
    found = re.findall(rf"^\s*{key}:\s*\[([^\]]*)\]", text, re.MULTILINE)
    assert found, f"no inline list for {key}"
    return [item.strip().strip('"') for item in found[-1].split(",")]


def test_ci_tests_three_systems_and_python_3_11_to_3_14() -> None:
    text = workflow("ci.yml")
    systems = matrix_list(text, "os")
    assert {system.split("-")[0] for system in systems} == {"ubuntu", "macos", "windows"}
    assert matrix_list(text, "python") == ["3.11", "3.12", "3.13", "3.14"]
    for check in (
        "ruff check python tests benches",
        "ruff format --check python tests benches",
        "mypy --strict python/",
        "python -m mypy.stubtest prism_tools._core",
        "cargo fmt --all -- --check",
        "cargo clippy --all-targets -- -D warnings",
        "cargo test",
        "python -m pip install '.[test]' && python -m pytest",
        "bash .ci/run",
    ):
        assert check in text, check


def test_release_builds_abi3_wheels_a_free_threaded_build_and_an_sdist() -> None:
    text = workflow("release.yml")
    for platform in ("linux x86_64", "linux aarch64", "macos", "windows"):
        assert f"name: {platform}" in text or platform in text, platform
    assert "--interpreter python3.14t" in text
    # The free-threaded build drops our `abi3` feature; the abi3 rows keep the defaults.
    assert "--no-default-features --features python --interpreter python3.14t" in text
    assert "command: sdist" in text
    assert ".ci/check-wheel.sh" in text


def test_the_default_build_is_abi3_and_the_package_needs_python_3_11() -> None:
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text(encoding="utf-8"))
    assert "abi3" in cargo["features"]["default"]
    assert "pyo3/abi3-py311" in cargo["features"]["abi3"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.11"


def test_ci_run_calls_the_readme_test_command_and_checks_the_wheel() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, re.DOTALL)
    assert len(blocks) >= 2
    install_and_demo, install_and_test = blocks[0].strip(), blocks[1].strip()
    assert install_and_demo == "pip install . && prism-tools demo"
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # `.ci/run` runs the README's command through the venv's pip.
    assert install_and_test == "pip install '.[test]' && python -m pytest"
    assert f"python -m {install_and_test}" in run
    assert "pip wheel" in run
    assert "bash .ci/check-wheel.sh" in run
