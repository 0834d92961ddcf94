"""One registry and one redactor shared by many threads: no lost writes, no torn reads."""

from __future__ import annotations

import threading
from collections.abc import ItemsView, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from prism_tools import (
    ToolDefinition,
    ToolFilter,
    check_schema,
    create_json_schema_adapter,
    create_secret_redactor,
    create_tool_registry,
)


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


@pytest.mark.timeout(60)
def test_a_schema_another_thread_changes_while_a_mapping_in_it_is_read_is_validated() -> None:
    # The core walks the schema; a host mapping in it runs Python code to list its items, and
    # meanwhile another thread adds keys to the dict the walk is in. That used to panic the core.
    class Waits(Mapping[str, Any]):
        def __init__(self, schema: dict[str, Any]) -> None:
            self.schema = schema

        def __getitem__(self, key: str) -> Any:
            return {"type": "string"}[key]

        def __iter__(self) -> Iterator[str]:
            return iter(["type"])

        def __len__(self) -> int:
            return 1

        def items(self) -> ItemsView[str, Any]:
            schema = self.schema
            writer = threading.Thread(target=lambda: schema.update({f"x-{len(schema)}": {}}))
            writer.start()
            writer.join()
            return super().items()

    def fresh() -> dict[str, Any]:
        schema: dict[str, Any] = {}
        schema["properties"] = {"a": Waits(schema)}
        schema["type"] = "object"
        return schema

    schema = fresh()
    issues = create_json_schema_adapter().validate(schema, {"a": 1})
    assert [(issue.path, issue.keyword) for issue in issues] == [("/a", "type")]
    assert "x-2" in schema  # the other thread did write while the schema was read
    check_schema(fresh())  # passes the guards
    create_tool_registry([ToolDefinition("t", parameters=fresh())], check_schemas=True)
