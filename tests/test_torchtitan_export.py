"""The torchtitan export (:mod:`autotune.torchtitan_export`), its TOML read by torchtitan's
own config manager and lr schedulers."""

from __future__ import annotations

import math
import tomllib

import pytest

from autotune.train_export import training_export
from tests.training_records import _lrs, _parallel, _record


def test_torchtitan_sections_parse_as_toml_with_torchtitans_own_keys():
    import tomllib

    from autotune.torchtitan_export import JOB_CONFIG_KEYS

    out = training_export(_parallel(layout="fsdp2", reshard_after_forward=False,
                                    precision="fp8", compile=True), "torchtitan")  # fmt: skip
    parsed = tomllib.loads(out.text)
    for section, values in out.settings.items():  # a dotted section is a nested table
        assert set(values) <= JOB_CONFIG_KEYS[section], section
    assert parsed["parallelism"] == {"data_parallel_replicate_degree": 1,
                                     "data_parallel_shard_degree": 4, "tensor_parallel_degree": 1,
                                     "fsdp_reshard_after_forward": "never"}  # fmt: skip
    # 16 sequences over 4 shards of micro-batches of 2: torchtitan derives accumulation 2
    assert parsed["training"]["local_batch_size"] == 2
    assert parsed["training"]["global_batch_size"] == 16
    assert parsed["model"]["converters"] == ["quantize.linear.float8"]
    assert parsed["quantize"]["linear"]["float8"] == {"filter_fqns": ["output"]}
    assert parsed["compile"] == {"enable": True, "components": ["model"]}
    assert parsed["activation_checkpoint"]["mode"] == "none"


#: The fields of torchtitan 0.2.2's JobConfig sections that an export may touch, copied from
#: its torchtitan/config/job_config.py (the same in 0.2.0 and 0.2.1), whose ConfigManager
#: refuses a TOML key its dataclass lacks ("Invalid field names in ... Training: {'compile'}").
TORCHTITAN_0_2_FIELDS = {
    "training": {"dataloader", "dataset", "dataset_path", "dtype", "enable_cpu_offload",
                 "gc_debug", "gc_freq", "global_batch_size", "local_batch_size", "max_norm",
                 "mixed_precision_param", "mixed_precision_reduce", "seq_len", "steps"},
    "parallelism": {"context_parallel_degree", "data_parallel_replicate_degree",
                    "data_parallel_shard_degree", "disable_loss_parallel",
                    "enable_async_tensor_parallel", "expert_parallel_degree",
                    "fsdp_reshard_after_forward", "pipeline_parallel_degree",
                    "tensor_parallel_degree"},
    "activation_checkpoint": {"debug", "determinism_check", "early_stop", "memory_budget", "mode",
                              "preserve_rng_state", "selective_ac_option"},
    "optimizer": {"beta1", "beta2", "early_step_in_backward", "eps", "implementation", "lr",
                  "name", "weight_decay"},
    "lr_scheduler": {"decay_ratio", "decay_type", "min_lr_factor", "warmup_steps"},
    "compile": {"backend", "components", "enable"},
    "model": {"converters", "flavor", "hf_assets_path", "name", "print_after_conversion",
              "tokenizer_path"},
    "quantize": {"grouped_mm", "linear"},
    "quantize.linear": {"float8", "mx"},
    "quantize.linear.float8": {"emulate", "enable_fsdp_float8_all_gather", "filter_fqns",
                               "precompute_float8_dynamic_scale_for_fsdp", "recipe_name"},
}  # fmt: skip


def _sections(table: dict, prefix: str = "") -> dict[str, set[str]]:
    """A parsed TOML file's tables by dotted name, each with its keys."""
    found = {prefix: set(table)} if prefix else {}
    for key, value in table.items():
        if isinstance(value, dict):
            found.update(_sections(value, f"{prefix}.{key}" if prefix else key))
    return found


@pytest.mark.parametrize("precision", ["bf16", "fp8", "fp32"])
@pytest.mark.parametrize("compile", [True, False])
def test_torchtitan_export_has_only_keys_torchtitan_0_2_reads(precision, compile):
    # torchtitan 0.2's ConfigManager refused every export: `compile` left [training] for
    # [compile] enable, and [float8] became [quantize.linear.float8], converter included
    import tomllib

    out = training_export(_parallel(layout="fsdp2", precision=precision, compile=compile),
                          "torchtitan")  # fmt: skip
    parsed = tomllib.loads(out.text)
    for section, keys in _sections(parsed).items():
        assert keys <= TORCHTITAN_0_2_FIELDS[section], (section, keys)
    assert parsed["compile"]["enable"] is compile
    float8 = ["quantize.linear.float8"] if precision == "fp8" else None
    assert parsed.get("model", {}).get("converters") == float8


def test_torchtitans_own_config_manager_reads_the_export(tmp_path):
    manager = pytest.importorskip("torchtitan.config.manager")
    out = training_export(_parallel(layout="fsdp2", precision="fp8", compile=True), "torchtitan")
    path = tmp_path / "tuned.toml"
    path.write_text(out.text)
    config = manager.ConfigManager().parse_args(["--job.config_file", str(path)])
    assert config.compile.enable and config.training.local_batch_size == 2
    assert config.compile.components == ["model"]  # the blocks, as the tuned step compiled
    assert config.model.converters == ["quantize.linear.float8"]
    assert config.training.max_norm == math.inf  # no clipping, as the tuned step ran


def test_torchtitan_says_in_the_file_what_it_cannot_express(tmp_path):
    import tomllib

    out = training_export(_record(), "torchtitan")  # fp16, flash attention, one GPU
    assert set(out.not_expressed) == {"attention_backend", "precision", "max_norm"}
    assert out.text.startswith("# not expressed: ")
    assert tomllib.loads(out.text)["training"]["mixed_precision_param"] == "float32"
    with pytest.raises(ValueError, match="no key 'batch_size'"):
        from autotune.torchtitan_export import check_keys

        check_keys({"training": {"batch_size": 8}})


@pytest.mark.parametrize(("layout", "written"), [("tp", "float32"), ("ddp", "bfloat16"),
                                                 ("fsdp2", "bfloat16")])  # fmt: skip
def test_torchtitan_says_it_trains_a_tensor_parallel_bf16_winner_in_fp32(layout, written):
    # a bf16 winner under tp was written mixed_precision_param = "bfloat16" with no note, but
    # torchtitan 0.2 mixes precision only through FSDP, or autocast under DDP and one GPU: under
    # tensor parallel alone it logs "Mixed precision training is disabled" and trains in fp32
    out = training_export(_parallel(layout=layout), "torchtitan")
    assert tomllib.loads(out.text)["training"]["mixed_precision_param"] == written
    if layout == "tp":
        note = out.not_expressed["precision"]
        assert note.startswith("bf16 under tensor parallel: ") and "fp32 is written" in note
        assert "# not expressed: precision: bf16 under tensor parallel" in out.text
    else:
        assert "precision" not in out.not_expressed


def test_torchtitan_holds_its_lr_schedule_at_the_tuned_lr():
    # torchtitan 0.2's default schedule warms up over 200 steps, then decays linearly to 0
    out = training_export(_record(), "torchtitan")
    assert tomllib.loads(out.text)["lr_scheduler"] == {"warmup_steps": 0, "decay_ratio": 0.0}


def test_torchtitans_own_lr_scheduler_keeps_the_exported_lr(tmp_path):
    manager = pytest.importorskip("torchtitan.config.manager")
    import torch
    from torchtitan.components.lr_scheduler import build_lr_schedulers

    path = tmp_path / "tuned.toml"
    path.write_text(training_export(_record(), "torchtitan").text)
    config = manager.ConfigManager().parse_args(["--job.config_file", str(path),
                                                 "--training.steps", "50"])  # fmt: skip
    optimizer = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=config.optimizer.lr)
    schedulers = build_lr_schedulers([optimizer], config.lr_scheduler, config.training.steps)
    assert _lrs(optimizer, schedulers, 50) == {3e-4}


@pytest.mark.parametrize("compile", [True, False])
def test_torchtitan_compiles_the_decoder_blocks_alone_as_the_tuned_step_did(compile):
    # [compile] enable alone took torchtitan 0.2's default components, ["model", "loss"]: the
    # exported run compiled its loss too, which the tuned step (each block compiled) did not
    out = training_export(_record(compile=compile), "torchtitan")
    parsed = tomllib.loads(out.text)["compile"]
    assert parsed == ({"enable": True, "components": ["model"]} if compile else {"enable": False})
