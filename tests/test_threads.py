"""One registry and one redactor shared by many threads: no lost writes, no torn reads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from prism_tools import ToolDefinition, ToolFilter, create_secret_redactor, create_tool_registry


@pytest.mark.timeout(60)
def test_concurrent_register_and_lookup() -> None:
    registry = create_tool_registry()
    names = [f"tool_{index}" for index in range(400)]

    def register(name: str) -> None:
        registry.register(ToolDefinition(name=name))

    def read(name: str) -> bool:
        found = registry.get(name)
        return found is None or found.name == name

    with ThreadPoolExecutor(max_workers=8) as pool:
        writes = [pool.submit(register, name) for name in names]
        reads = [pool.submit(read, name) for name in names * 3]
        for future in writes:
            future.result()
        assert all(future.result() for future in reads)
    assert len(registry) == len(names)
    assert sorted(registry.names()) == sorted(names)
    assert [tool.name for tool in registry.list()] == registry.names()
    permitted = registry.filter(ToolFilter(allow=names[:10]))
    assert sorted(tool.name for tool in permitted) == sorted(names[:10])


@pytest.mark.timeout(60)
def test_concurrent_redaction() -> None:
    redactor = create_secret_redactor(["alpha-secret", "beta-secret"])
    values = [{"k": f"{index} alpha-secret", "l": ["beta-secret"] * 3} for index in range(500)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(redactor.redact, values))
    assert all("secret" not in repr(result) for result in results)
    assert values[0]["k"] == "0 alpha-secret"


@pytest.mark.timeout(60)
def test_row_ids_stay_unique_across_blocks_and_threads() -> None:
    # Ids come from the core a block at a time; many threads draining blocks at once must
    # never be handed the same id.
    from prism_tools.dispatch import new_row_id

    def draw(count: int) -> list[str]:
        return [new_row_id() for _ in range(count)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        drawn = [row_id for batch in pool.map(draw, [700] * 16) for row_id in batch]
    assert len(drawn) == 16 * 700
    assert len(set(drawn)) == len(drawn)
    prefixes = {row_id.rsplit("_", 1)[0] for row_id in drawn}
    assert len(prefixes) == 1
