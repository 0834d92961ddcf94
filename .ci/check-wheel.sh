#!/usr/bin/env bash
# Installs one built wheel into a fresh venv (no source tree in sight) and proves it works:
# the tag is abi3 for CPython 3.11+, the compiled core loads, and a call goes through dispatch.
#
#   .ci/check-wheel.sh dist/prism_tools-0.1.0-cp311-abi3-manylinux_2_34_x86_64.whl
set -euo pipefail

wheel="${1:?usage: check-wheel.sh WHEEL}"
[[ -f "$wheel" ]] || { echo "check-wheel.sh: no such wheel: $wheel" >&2; exit 1; }
# The tag says cp311-abi3 (the stable ABI of our oldest CPython) and Requires-Python says >=3.11.
case "$(basename "$wheel")" in
	*-cp311-abi3-*.whl) ;;
	*) echo "check-wheel.sh: not an abi3 wheel: $(basename "$wheel")" >&2; exit 1 ;;
esac
"${PYTHON:-python3}" - "$wheel" <<'PY'
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as wheel:
    [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    lines = wheel.read(name).decode("utf-8").splitlines()
if "Requires-Python: >=3.11" not in lines:
    sys.exit("check-wheel.sh: the wheel does not declare Requires-Python: >=3.11")
PY

python="${PYTHON:-python3}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$python" -m venv "$scratch/venv"
bin="$scratch/venv/bin"
[[ -d "$scratch/venv/Scripts" ]] && bin="$scratch/venv/Scripts" # Windows
"$bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
# Run from the scratch dir so `import prism_tools` cannot pick up a source checkout.
cd "$scratch"
"$bin/python" - <<'PY'
import asyncio
import sysconfig
from pathlib import Path

import prism_tools
from prism_tools import ToolCall, ToolDefinition, ToolExecutionContext, _core
from prism_tools import create_tool_registry, dispatch_tool_call

site = Path(sysconfig.get_paths()["purelib"]).resolve()
core = Path(_core.__file__).resolve()
assert site in core.parents, f"core loaded from outside the venv: {core}"
assert core.name.endswith(".abi3.so") or core.suffix == ".pyd", core.name


async def main() -> None:
    registry = create_tool_registry([ToolDefinition(name="echo", execute=lambda a, c: a["x"])])
    context = ToolExecutionContext(session_id="s", run_id="r", tool_call_id="c")
    result = await dispatch_tool_call(
        ToolCall(id="c", name="echo", arguments='{"x": 41}'), registry=registry, context=context
    )
    assert result.value == 41 and result.error is None, result
    blocked = await dispatch_tool_call(
        ToolCall(id="c", name="nope", arguments={}), registry=registry, context=context
    )
    assert blocked.metadata == {"blocked_reason": "unknown_tool"}, blocked


asyncio.run(main())
print(f"wheel ok: prism_tools {prism_tools.__version__}, core {core.name}")
PY
"$bin/prism-tools" version
