"""An export's text (:mod:`autotune.export_text`): what a target cannot express stays in its
one comment line."""

from __future__ import annotations

import pytest

from autotune.train_export import training_export
from tests.training_records import _record


@pytest.mark.parametrize("target", ["accelerate", "torchtitan"])
def test_a_value_with_a_newline_stays_inside_its_comment(target):
    import tomllib

    import yaml

    mode = "default\nmixed_precision: no\n[x]\nbad = 1"
    out = training_export(_record(compile_mode=mode, attention_backend="a\u2028b"), target)
    if target == "torchtitan":  # torchtitan has no compile mode: a comment
        parsed = tomllib.loads(out.text)
        sections = {"training", "parallelism", "activation_checkpoint", "optimizer",
                    "lr_scheduler", "compile"}  # fmt: skip
        assert set(parsed) <= sections
    else:  # accelerate's dynamo_mode holds the mode; the backend is a comment
        parsed = yaml.safe_load(out.text)
        assert (
            parsed["mixed_precision"] == "fp16" and parsed["dynamo_config"]["dynamo_mode"] == mode
        )
    comments = [line for line in out.text.splitlines() if line.startswith("#")]
    assert len(comments) == len(out.not_expressed)
