"""Every description the Dagster UI shows renders as written: placeholders such as
``history/<YYYY-MM>/`` sit in code spans (the UI renders descriptions as markdown with HTML and
drops what looks like a tag), and nothing is written in RST."""

from __future__ import annotations

import dagster as dg

from skewtape_pipeline.definitions import defs
from skewtape_pipeline.orchestration.ticks.tier_assets import RetierConfig
from skewtape_pipeline_tests.markup import markup_problems


def described() -> dict[str, str | None]:
    """{what: description} of every asset, check, job, op, sensor, schedule, resource (its own
    and its fields') and run config the code location shows."""
    texts: dict[str, str | None] = {}
    asset_graph = defs.resolve_asset_graph()
    for key in asset_graph.get_all_asset_keys():
        texts[f"asset {key.to_user_string()}"] = asset_graph.get(key).description
    for check_key in asset_graph.asset_check_keys:
        spec = asset_graph.get_check_spec(check_key)
        texts[f"check {check_key.name}"] = spec.description
    for job in defs.resolve_all_job_defs():
        texts[f"job {job.name}"] = job.description
        for node in job.graph.iterate_op_defs():  # an op's docstring is its description
            texts[f"op {node.name}"] = node.description
    for sensor in defs.sensors or []:
        texts[f"sensor {sensor.name}"] = sensor.description
    for schedule in defs.schedules or []:
        texts[f"schedule {schedule.name}"] = schedule.description
    configs: dict[str, type] = {"config RetierConfig": RetierConfig}
    configs |= {f"resource {name}": type(r) for name, r in (defs.resources or {}).items()}
    for name, cls in configs.items():
        texts[name] = cls.__doc__
        for field_name, field in cls.model_fields.items():
            texts[f"{name}.{field_name}"] = field.description
    return texts


def test_descriptions_when_rendered_keep_placeholders_and_use_no_rst():
    texts = described()
    assert {"asset history_snapshot", "check checksums_verified", "resource skewtape"} <= set(texts)
    assert sum(1 for name in texts if name.startswith("check ")) >= 5
    assert {"op publish_snapshot", "op verify_month_snapshot"} <= set(texts)
    problems = [p for name, text in texts.items() for p in markup_problems(name, text)]
    assert problems == []


def test_descriptions_when_a_resource_is_shown_its_docstring_is_the_description():
    resource = defs.resources["skewtape"]
    assert isinstance(resource, dg.ConfigurableResource)
    assert resource.get_resource_definition().description == type(resource).__doc__
