"""Training-stack exports, each constructed by the real library that reads it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tomllib

import optuna
import pytest

from autotune.driver.trial_attrs import STUDY
from autotune.export import best_record
from autotune.train_export import TrainExportError, training_export

PROBLEM = {"global_batch": 16, "lr": 3e-4, "seq_len": 64}
TUNED = {"micro_batch": 4, "precision": "fp16", "loss_scale_init": 1024,
         "activation_checkpointing": True, "attention_backend": "flash",
         "optimizer": "foreach", "compile": True}  # fmt: skip


def _record(**config) -> dict:
    return {"config": {**TUNED, **config}, "problem": PROBLEM}


def test_hf_training_arguments_construct_from_the_export(tmp_path):
    transformers = pytest.importorskip("transformers")
    out = training_export(_record(precision="bf16"), "hf")
    # use_cpu: on a machine without a GPU TrainingArguments refuses bf16 otherwise
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          **json.loads(out.text))  # fmt: skip
    assert args.per_device_train_batch_size == 4 and args.gradient_accumulation_steps == 4
    assert args.bf16 and not args.fp16 and args.torch_compile
    assert getattr(args, "activation_checkpointing", None) or args.gradient_checkpointing
    assert str(args.optim.value) == "adamw_torch" and args.learning_rate == 3e-4
    assert "attention_backend" in out.not_expressed  # no SDPA backend argument exists
    assert "loss_scale_init" not in out.not_expressed  # bf16: no loss scale to set


def test_hf_export_says_what_it_cannot_express():
    out = training_export(_record(), "hf")
    assert out.settings["fp16"] is True
    assert set(out.not_expressed) == {"attention_backend", "loss_scale_init", "weight_decay",
                                      "seq_len"}  # fmt: skip
    assert "FLASH_ATTENTION" in out.not_expressed["attention_backend"]


def test_accelerate_config_loads_with_accelerates_own_reader(tmp_path):
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig

    out = training_export(_record(), "accelerate")
    path = tmp_path / "accelerate.yaml"
    path.write_text(out.text)
    config = ClusterConfig.from_yaml_file(str(path))
    assert str(config.mixed_precision) == "fp16" and config.num_processes == 1
    assert config.dynamo_config["dynamo_backend"] == "INDUCTOR"
    # what the file cannot hold is written into it as comments
    assert "# not expressed: gradient_accumulation_steps: 4" in out.text
    assert "# not expressed: activation_checkpointing" in out.text


def test_deepspeed_config_passes_deepspeeds_own_checks():
    pytest.importorskip("deepspeed")
    import torch
    from deepspeed.runtime.config import DeepSpeedConfig

    out = training_export(_record(), "deepspeed")
    config = DeepSpeedConfig(json.loads(out.text), mpu=None)  # checks the batch arithmetic
    assert config.train_batch_size == 16 and config.gradient_accumulation_steps == 4
    assert config.train_micro_batch_size_per_gpu == 4
    # fp16 as the tuned step ran it: autocast over fp32 weights, not fp16 weights
    assert config.torch_autocast_enabled and config.torch_autocast_dtype == torch.float16
    assert not config.float16_config.enabled and not config.bfloat16_config.enabled
    # torch_autocast's GradScaler starts at 2^16 and takes no other first scale
    assert out.not_expressed["loss_scale_init"].startswith("1024: DeepSpeed's torch_autocast")
    assert config.optimizer_name == "adamw" and config.optimizer_params["torch_adam"] is True
    with pytest.raises(AssertionError):  # a wrong product is refused by DeepSpeed itself
        DeepSpeedConfig({**json.loads(out.text), "train_batch_size": 15}, mpu=None)


_DEEPSPEED_ENGINE = """
import json, sys
import deepspeed
import torch
from deepspeed.runtime.torch_autocast import has_comm_dtype
deepspeed.init_distributed(dist_backend="gloo")
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                  config=json.loads(sys.argv[1]))
params = list(engine.module.parameters())
try:
    out = str(engine(torch.randn(4, 8)).dtype)
except RuntimeError as exc:  # bf16 weights meeting the fp32 input
    out = str(exc)
print(json.dumps([sorted({str(p.dtype) for p in params}), out,
                  [str(p.comm_dtype) for p in params if has_comm_dtype(p)]]))
"""


def test_deepspeeds_engine_keeps_the_fp32_weights_the_tuned_bf16_step_autocast_over():
    # the export's bf16 section is DeepSpeed's own mixed precision: it cast the weights to bf16
    # (an fp32 copy in the optimizer), where the tuned step ran autocast over fp32 weights
    pytest.importorskip("deepspeed")
    from autotune.objectives.train_parallel import free_port

    record = {"config": {**TUNED, "precision": "bf16", "compile": False},
              "problem": {"global_batch": 8, "lr": 3e-4, "seq_len": 8}}  # fmt: skip
    out = training_export(record, "deepspeed")
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0",
           "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_SIZE": "1"}  # fmt: skip
    done = subprocess.run([sys.executable, "-P", "-c", _DEEPSPEED_ENGINE, out.text],
                          capture_output=True, text=True, env=env, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    weights, output, reduced_in = json.loads(done.stdout.strip().splitlines()[-1])
    assert weights == ["torch.float32"] and output == "torch.bfloat16"
    assert reduced_in == []  # no gradient is reduced in bf16: all in fp32, as the step's were


def test_a_record_that_is_no_training_step_is_refused():
    with pytest.raises(TrainExportError, match="needs a train-step sweep"):
        training_export({"config": {"BLOCK_M": 64}, "problem": {"M": 64}}, "hf")


@pytest.mark.parametrize("target", ["hf", "accelerate", "deepspeed", "torchtitan"])
def test_another_workload_with_a_micro_batch_is_no_training_step(target):
    # a file's objective tuning micro_batch and precision was exported as the training step,
    # its AdamW betas (0.9, 0.95), weight decay 0.1 and unrun knobs written as if tuned
    record = {"study": "mine", "workload": "/home/me/my_train.py",
              "config": {"micro_batch": 4, "precision": "bf16"}, "problem": PROBLEM}  # fmt: skip
    with pytest.raises(TrainExportError, match=r"^a training-stack export needs a train-step "
                       r"sweep; study 'mine' tuned /home/me/my_train.py \(--study"):  # fmt: skip
        training_export(record, target)
    training_export({**record, "workload": "train-step"}, target)


def test_the_cli_writes_the_export_and_what_it_could_not_express(tmp_path, one_trial_study):
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = one_trial_study(url, "t", "train-step", PROBLEM, TUNED, "tokens_per_s", 1000.0)
    assert best_record(study)["config"]["micro_batch"] == 4
    target = tmp_path / "ds.json"
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "export", "--to", "deepspeed", "--storage", url,
         "--output", str(target)], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(target.read_text())["gradient_accumulation_steps"] == 4
    notes = json.loads((tmp_path / "ds.json.not_expressed.json").read_text())
    assert "attention_backend" in notes and "not expressed in deepspeed" in done.stderr


PARALLEL = {"global_batch": 16, "lr": 3e-4, "seq_len": 64, "world_size": 4}


def _parallel(**config) -> dict:
    base = {"micro_batch": 2, "precision": "bf16", "activation_checkpointing": False,
            "attention_backend": "default", "optimizer": "fused", "compile": False}  # fmt: skip
    return {"config": {**base, **config}, "problem": PARALLEL}


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


@pytest.mark.parametrize("target", ["hf", "accelerate", "deepspeed", "torchtitan"])
def test_every_target_states_the_sequence_length_the_micro_batch_was_tuned_at(target):
    # only torchtitan wrote seq_len; a micro-batch of 4 tuned at 64 tokens is no micro-batch
    # for 4096, and hf, accelerate and deepspeed did not say which length it was
    out = training_export(_record(), target)
    if target == "torchtitan":  # a key of its own: tokens per step = global_batch_size x seq_len
        training = tomllib.loads(out.text)["training"]
        assert (training["seq_len"], training["global_batch_size"]) == (64, 16)
        assert "seq_len" not in out.not_expressed
    else:
        note = out.not_expressed["seq_len"]
        assert note.startswith("64: the micro-batch was tuned at this")
        assert "tokens per optimizer step = global_batch 16 x 64 = 1024" in note
    if target == "accelerate":  # in the file itself
        assert "# not expressed: seq_len: 64: " in out.text
    # a record without it (a replay's table) says so rather than nothing
    bare = training_export({**_record(), "problem": {"global_batch": 16, "lr": 3e-4}}, target)
    assert bare.not_expressed["seq_len"].startswith("not recorded: the micro-batch holds only")


def test_no_target_clips_the_gradients_the_tuned_step_did_not_clip(tmp_path):
    # TrainingArguments, DeepSpeed and torchtitan clip at norm 1.0 unless told; the tuned step
    # (objectives/train_loop.py) never clips
    transformers = pytest.importorskip("transformers")
    hf = training_export(_record(precision="bf16"), "hf")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          **json.loads(hf.text))  # fmt: skip
    assert args.max_grad_norm == 0  # the Trainer clips only where max_grad_norm > 0
    # the Trainer decays no norm weight; the tuned step decayed them all: said, not dropped
    assert "RMSNorm gains" in hf.not_expressed["weight_decay"]
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig

    ds = DeepSpeedConfig(json.loads(training_export(_record(), "deepspeed").text), mpu=None)
    assert ds.gradient_clipping == 0.0  # DeepSpeed's default is 1.0
    titan = training_export(_record(), "torchtitan")
    # torchtitan 0.2 clips every step: 0 would zero the gradients, inf scales them by 1
    assert tomllib.loads(titan.text)["training"]["max_norm"] == math.inf
    assert "still computes their norm" in titan.not_expressed["max_norm"]
    accelerate = training_export(_record(), "accelerate")
    assert "no gradient clipping" in accelerate.not_expressed["optimizer"]
    assert "AdamW(model.parameters()" in accelerate.not_expressed["optimizer"]


def test_torchtitan_says_in_the_file_what_it_cannot_express(tmp_path):
    import tomllib

    out = training_export(_record(), "torchtitan")  # fp16, flash attention, one GPU
    assert set(out.not_expressed) == {"attention_backend", "precision", "max_norm"}
    assert out.text.startswith("# not expressed: ")
    assert tomllib.loads(out.text)["training"]["mixed_precision_param"] == "float32"
    with pytest.raises(ValueError, match="no key 'batch_size'"):
        from autotune.torchtitan_export import check_keys

        check_keys({"training": {"batch_size": 8}})


def test_parallel_layouts_reach_every_target():
    ddp = training_export(_parallel(layout="ddp"), "deepspeed")
    # DeepSpeed checks train_batch_size = micro x accumulation x its world: 16 = 2 x 2 x 4 GPUs
    assert ddp.settings["train_batch_size"] == 16
    assert ddp.settings["gradient_accumulation_steps"] == 2
    # which world: its launcher takes every GPU of the node unless told (the note said nothing)
    assert ddp.not_expressed["layout"] == (
        "ddp over 4 GPUs: launch with deepspeed --num_gpus 4 (train_batch_size counts 4 processes)"
    )
    fsdp = training_export(_parallel(layout="fsdp2"), "deepspeed")
    assert fsdp.settings["zero_optimization"] == {"stage": 3}
    assert "--num_gpus 4" in fsdp.not_expressed["layout"]
    assert "reshard_after_forward" not in fsdp.not_expressed  # ZeRO-3 reshards, as it did
    assert fsdp.settings["torch_autocast"]["lower_precision_safe_modules"] == []  # fp32 reduce
    assert "ZeRO stage 3 under torch_autocast gathers the fp32" in fsdp.not_expressed["precision"]
    tp = training_export(_parallel(layout="tp"), "hf")
    assert tp.settings["gradient_accumulation_steps"] == 8  # every GPU trains the whole batch
    assert "tp_plan" in tp.not_expressed["layout"]
    acc = training_export(_parallel(layout="fsdp2", reshard_after_forward=False), "accelerate")
    assert acc.settings["distributed_type"] == "FSDP" and acc.settings["num_processes"] == 4
    assert acc.settings["fsdp_config"]["fsdp_reshard_after_forward"] is False


_DEEPSPEED_RANK = """
import json, sys
import deepspeed
from deepspeed.runtime.config import DeepSpeedConfig
deepspeed.init_distributed(dist_backend="gloo")
try:
    c = DeepSpeedConfig(json.loads(sys.argv[1]), mpu=None)
    print(json.dumps([c.tensor_parallel_config.autotp_size, c.gradient_accumulation_steps,
                      c.train_micro_batch_size_per_gpu]))
except AssertionError as exc:
    print(json.dumps(str(exc)))
"""


def test_deepspeed_takes_a_tensor_parallel_winner_as_autotp_on_its_processes():
    # a tp winner was a note only, and its train_batch_size (micro x accumulation, data
    # parallel 1) failed DeepSpeed's batch check on the tp processes it must launch on
    pytest.importorskip("deepspeed")
    from autotune.objectives.train_parallel import free_port

    record = {**_parallel(layout="tp"), "problem": {**PARALLEL, "world_size": 2}}
    out = training_export(record, "deepspeed")
    port = free_port()
    ranks = [
        subprocess.Popen(
            [sys.executable, "-P", "-c", _DEEPSPEED_RANK, out.text], stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env={**os.environ, "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2", "LOCAL_SIZE": "2"},
        )
        for rank in range(2)
    ]  # fmt: skip
    said = [json.loads(rank.communicate(timeout=180)[0].strip().splitlines()[-1]) for rank in ranks]
    # AutoTP over both processes, the whole global batch of 16 = 2 x 8 on each
    assert said == [[2, 8, 2], [2, 8, 2]]
    assert "--num_gpus 2" in out.not_expressed["layout"]
    assert "row-wise" in out.not_expressed["layout"]  # what AutoTP may shard otherwise


def test_deepspeed_says_it_cannot_keep_the_weights_gathered_after_the_forward():
    # reshard_after_forward=False, tuned under FSDP2, was dropped without a word in ZeRO-3
    out = training_export(_parallel(layout="fsdp2", reshard_after_forward=False), "deepspeed")
    assert out.settings["zero_optimization"] == {"stage": 3}
    assert out.not_expressed["reshard_after_forward"].startswith("false: the tuned step kept")


def test_accelerate_reads_a_multi_gpu_fsdp2_config(tmp_path):
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig

    mode = "max-autotune-no-cudagraphs"
    out = training_export(_parallel(layout="fsdp2", compile=True, compile_mode=mode), "accelerate")
    path = tmp_path / "accelerate.yaml"
    path.write_text(out.text)
    config = ClusterConfig.from_yaml_file(str(path))
    assert config.distributed_type == "FSDP" and config.num_processes == 4
    assert config.fsdp_config["fsdp_version"] == 2
    assert config.dynamo_config["dynamo_mode"] == "max-autotune-no-cudagraphs"


_ACCELERATE_RANK = """
import json, os
from accelerate.parallelism_config import ParallelismConfig
told = os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG")
print(json.dumps([told, ParallelismConfig().tp_size]))
"""


def test_accelerate_launches_a_tensor_parallel_winner_tensor_parallel(tmp_path):
    # written MULTI_GPU alone, accelerate launch handed Accelerator() no tensor-parallel size,
    # so prepare() wrapped the parallelize_module'd model in DDP, which refuses DTensor weights
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig

    record = {**_parallel(layout="tp"), "problem": {**PARALLEL, "world_size": 2}}
    out = training_export(record, "accelerate")
    config, rank = tmp_path / "accelerate.yaml", tmp_path / "rank.py"
    config.write_text(out.text)
    rank.write_text(_ACCELERATE_RANK)
    assert ClusterConfig.from_yaml_file(str(config)).distributed_type == "MULTI_GPU"
    launch = [sys.executable, "-P", "-m", "accelerate.commands.launch", "--config_file",
              str(config), "--main_process_port", "0", str(rank)]  # fmt: skip
    done = subprocess.run(launch, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    said = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert said == [["true", 2], ["true", 2]]  # both processes, tensor parallel over 2
    assert "set model.tp_size = 2" in out.not_expressed["layout"]
    on_cpu = training_export({**record, "device": {"type": "cpu"}}, "accelerate")
    assert "refuses MULTI_CPU" in on_cpu.not_expressed["layout"]


def test_fsdp2_exports_say_accelerate_reduces_the_gradients_the_step_reduced_in_fp32(tmp_path):
    # the tuned step's FSDP2 policy reduced in fp32; accelerate's (the Trainer's too) reduces
    # in bf16, which neither export said
    transformers = pytest.importorskip("transformers")
    import torch
    from accelerate.utils import FullyShardedDataParallelPlugin

    record = _parallel(layout="fsdp2")
    hf = training_export(record, "hf")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          **json.loads(hf.text))  # fmt: skip
    # the plugin the Trainer builds, and the policy its Accelerator gives it
    plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    plugin.set_mixed_precision(args.mixed_precision)
    assert plugin.mixed_precision_policy.reduce_dtype == torch.bfloat16
    accelerate = training_export(record, "accelerate")
    for out in (hf, accelerate):
        assert out.not_expressed["reduce_dtype"].startswith("bfloat16: accelerate reduces")
        assert "reduced them in float32" in out.not_expressed["reduce_dtype"]
    assert "trainer.accelerator.state.fsdp_plugin" in hf.not_expressed["reduce_dtype"]
    # the policy the notes give, as accelerate takes it: kept over its bf16 one
    from autotune.train_notes import FSDP2_POLICY

    policy = {key: getattr(torch, name) for key, name in FSDP2_POLICY.items()}
    kept = FullyShardedDataParallelPlugin(fsdp_version=2, mixed_precision_policy=policy)
    kept.set_mixed_precision("bf16")
    assert kept.mixed_precision_policy.reduce_dtype == torch.float32
    assert kept.mixed_precision_policy.param_dtype == torch.bfloat16
    ddp = training_export(_parallel(layout="ddp"), "accelerate")
    assert "reduce_dtype" not in ddp.not_expressed


def test_hf_takes_fsdp2_and_the_compile_mode(tmp_path):
    transformers = pytest.importorskip("transformers")
    out = training_export(_parallel(layout="fsdp2", compile=True, compile_mode="reduce-overhead"),
                          "hf")  # fmt: skip
    assert out.settings["torch_compile_mode"] == "reduce-overhead"
    assert out.settings["fsdp_config"]["fsdp_version"] == 2
    kwargs = {k: v for k, v in json.loads(out.text).items()}
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **kwargs)
    assert args.torch_compile_mode == "reduce-overhead" and args.fsdp


TARGETS = ["hf", "accelerate", "deepspeed", "torchtitan"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("micro", "match"),
    [(0, "micro_batch 0: not a positive whole number"),
     (-2, "micro_batch -2: not a positive whole number"),
     ("eight", "micro_batch 'eight': not a positive whole number"),
     (2.5, "micro_batch 2.5: not a positive whole number"),
     (None, "micro_batch None: not a positive whole number"),
     (32, "micro_batch 32 does not divide global_batch 16"),
     (3, "micro_batch 3 does not divide global_batch 16")],
)  # fmt: skip
def test_a_micro_batch_with_no_whole_accumulation_is_refused_in_one_line(target, micro, match):
    with pytest.raises(TrainExportError, match=f"^{match}$"):
        training_export(_record(micro_batch=micro), target)


@pytest.mark.parametrize("target", TARGETS)
def test_the_data_parallel_share_must_hold_the_micro_batch(target):
    # 16 sequences over 4 data-parallel processes: 4 each, not a micro-batch of 8
    with pytest.raises(TrainExportError, match="8 does not divide global_batch 16 over 4 data"):
        training_export(_parallel(layout="ddp", micro_batch=8), target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("problem", "match"),
    [({"global_batch": 0}, "global_batch 0"), ({"global_batch": "x"}, "global_batch 'x'"),
     ({"lr": "fast"}, "lr 'fast'"), ({"lr": -1}, "lr -1"), ({"world_size": "four"},
     "world_size 'four'"), ({"world_size": -4}, "world_size -4")],
)  # fmt: skip
def test_a_bad_problem_value_is_refused_in_one_line(target, problem, match):
    record = {"config": {**TUNED, "micro_batch": 1, "layout": "ddp"},
              "problem": {**PROBLEM, **problem}}  # fmt: skip
    with pytest.raises(TrainExportError, match=match):
        training_export(record, target)


@pytest.mark.parametrize("target", ["hf", "accelerate", "deepspeed"])
@pytest.mark.parametrize("scale", [0, -1024, "big", float("inf"), float("nan")])
def test_an_fp16_loss_scale_that_is_no_positive_number_is_refused(target, scale):
    with pytest.raises(TrainExportError, match=r"^loss_scale_init .*: not a positive number$"):
        training_export(_record(loss_scale_init=scale), target)
    training_export(_record(loss_scale_init=scale, precision="bf16"), target)  # no scale used


def test_accelerate_says_fp16s_first_loss_scale():
    out = training_export(_record(), "accelerate")
    assert out.not_expressed["loss_scale_init"].startswith("1024: GradScaler(init_scale")


@pytest.mark.parametrize("target", ["hf", "accelerate"])
def test_a_loss_scale_that_is_the_scaler_s_own_default_needs_no_note(target):
    # every fp16 export said to set 2^16, the value the scaler starts at anyway
    out = training_export(_record(loss_scale_init=65536.0), target)
    assert "loss_scale_init" not in out.not_expressed


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("knob", "value"), [("attention_backend", "weird"), ("attention_backend", "paged"),
                        ("precision", "fp4")],
)  # fmt: skip
def test_a_value_the_training_step_lacks_is_a_note_not_a_crash(target, knob, value):
    out = training_export(_record(**{knob: value}), target)
    assert out.not_expressed[knob].startswith(f"{value}: not a")
    assert "training step" in out.not_expressed[knob]


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


def test_the_cli_refuses_a_micro_batch_beyond_the_global_batch_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(study_name="t", storage=url, direction="maximize")
    study.set_user_attr(STUDY, {"workload": "train-step", "problem": {**PROBLEM, "global_batch": 8},
                                "objectives": {"tokens_per_s": "maximize"}})  # fmt: skip
    params = {**TUNED, "micro_batch": 16}
    study.add_trial(optuna.trial.create_trial(
        params=params, value=1000.0, user_attrs={"status": "ok"},
        distributions={k: optuna.distributions.CategoricalDistribution([v])
                       for k, v in params.items()},
    ))  # fmt: skip
    for target in TARGETS:
        done = subprocess.run(
            [sys.executable, "-m", "autotune.cli", "export", "--to", target, "--storage", url],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == "error: micro_batch 16 does not divide global_batch 8"


@pytest.mark.parametrize("target", ["hf", "accelerate", "deepspeed", "torchtitan"])
def test_knobs_the_sweep_did_not_tune_are_exported_as_its_trials_ran_them(target):
    """A space that tuned only the micro-batch ran the default's bf16 (on a GPU): every target
    writes bf16, not the fp32 a config without ``precision`` used to mean."""
    untuned = {"precision": "bf16", "activation_checkpointing": False,
               "attention_backend": "default", "optimizer": "fused", "compile": False}  # fmt: skip
    record = {"config": {"micro_batch": 4}, "untuned": untuned, "problem": PROBLEM}
    precision = {  # where each target says bf16
        "hf": lambda s: s["bf16"], "accelerate": lambda s: s["mixed_precision"] == "bf16",
        "deepspeed": lambda s: s.get("torch_autocast", {}).get("dtype") == "bfloat16",
        "torchtitan": lambda s: s["training"]["mixed_precision_param"] == "bfloat16",
    }[target]  # fmt: skip
    assert precision(training_export(record, target).settings)
    plain = {"config": {"micro_batch": 4}, "problem": PROBLEM}  # an older record: fp32
    assert not precision(training_export(plain, target).settings)


def test_a_loss_scale_fixed_by_the_problem_is_the_one_exported():
    """``--problem loss_scale_init=1024`` fixed fp16's first loss scale for every trial."""
    record = {"config": {**TUNED, "loss_scale_init": None}, "problem": PROBLEM}
    del record["config"]["loss_scale_init"]
    fixed = {**record, "problem": {**PROBLEM, "loss_scale_init": 1024}}
    assert "loss_scale_init" not in training_export(record, "hf").not_expressed  # 2^16
    assert training_export(fixed, "hf").not_expressed["loss_scale_init"].startswith("1024: ")


def test_a_replay_of_a_train_step_table_exports_its_recorded_problem_labelled() -> None:
    # `autotune record train-step` stamps problem.global_batch ... on each row: the replay's
    # record carries them under "replay", its own problem is the table's path
    record = {"study": "r", "workload": "replay", "label": "REPLAY of t.csv",
              "config": TUNED, "problem": {"table": "t.csv", "params": list(TUNED)},
              "replay": {"workload": "train-step", "problem": PROBLEM,
                         "source": "replay of measurements on NVIDIA H200"}}  # fmt: skip
    out = training_export(record, "hf")
    assert out.settings["gradient_accumulation_steps"] == 4
    assert out.not_expressed["replay"] == "REPLAY of t.csv (replay of measurements on NVIDIA H200)"
    untouched = training_export(_record(), "hf")
    assert "replay" not in untouched.not_expressed


def test_a_replay_exports_the_recorded_knobs_it_did_not_replay_as_parameters() -> None:
    """A train-step table recorded at bf16 throughout and replayed with ``--params
    micro_batch``: the winner's row ran bf16 with fused AdamW, and the export said fp32 and
    torch's plain AdamW (``bf16: false``), as if the knobs left out of --params never ran."""
    record = {"study": "r", "workload": "replay", "config": {"micro_batch": 4},
              "problem": {"table": "t.csv", "params": ["micro_batch"]},
              "metrics": {"replay": True, "precision": "bf16", "optimizer": "fused",
                          "activation_checkpointing": True, "step_ms": 9.5},
              "replay": {"workload": "train-step", "problem": PROBLEM}}  # fmt: skip
    hf = training_export(record, "hf").settings
    assert hf["bf16"] is True and hf["optim"] == "adamw_torch_fused"
    assert hf["per_device_train_batch_size"] == 4 and hf["gradient_accumulation_steps"] == 4
    assert hf["activation_checkpointing"] is True
    # a table that records no workload: its columns are no known sweep's knobs
    unstamped = {
        **record,
        "replay": {"workload": None, "problem": {}},
        "problem": {"table": "t.csv", "params": ["micro_batch"], **PROBLEM},
    }
    assert training_export(unstamped, "hf").settings["bf16"] is False


def test_a_replay_of_a_stamped_table_without_a_global_batch_is_told_how_to_give_one():
    """The stamped table's record (as_recorded: its workload the stamp) lost the hint the
    unstamped table's gets, and was told it "tuned train-step of a train-step table"."""
    record = {"study": "T", "workload": "replay", "config": TUNED,
              "problem": {"table": "t.csv", "params": list(TUNED)},
              "replay": {"workload": "train-step", "problem": {"seq_len": 64}}}  # fmt: skip
    unstamped = {**record, "study": "U", "replay": {"workload": None, "problem": {}}}
    for given, table in ((record, "a train-step table"),
                         (unstamped, "a table that records no workload")):  # fmt: skip
        with pytest.raises(TrainExportError) as refused:
            training_export(given, "hf")
        assert str(refused.value) == (
            "a training-stack export needs a train-step sweep (micro_batch, global_batch); "
            f"study {given['study']!r} tuned replay of {table} (--study NAME picks another); "
            "replay a table without problem.global_batch with --problem global_batch=N"
        )


def test_the_cli_exports_a_stamped_train_step_replay_once_given_a_global_batch(tmp_path):
    from pathlib import Path

    import pandas as pd

    table = pd.read_csv(Path(__file__).parents[1] / "benchmarks" / "data" / "train_step_h200.csv")
    table["workload"] = "train-step"
    table.to_csv(tmp_path / "ts.csv", index=False)
    url = f"sqlite:///{tmp_path / 'ts.db'}"
    params = "micro_batch,precision,activation_checkpointing,attention_backend,optimizer"

    def autotune(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "autotune.cli", *args, "--storage", url]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)

    for study, problem in (("T", []), ("G", ["--problem", "global_batch=64"])):
        tuned = autotune("tune", "--replay", "ts.csv", "--params", params, "--metric",
                         "tokens_per_s", "--trials", "3", "--study", study, *problem)  # fmt: skip
        assert tuned.returncode == 0, tuned.stderr
    refused = autotune("export", "--to", "hf", "--study", "T")
    assert refused.returncode == 2 and refused.stdout == "", refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "tuned replay of a train-step table" in refused.stderr
    assert refused.stderr.strip().endswith("with --problem global_batch=N")
    exported = autotune("export", "--to", "hf", "--study", "G")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["gradient_accumulation_steps"] >= 1


def test_a_sweep_on_a_cpu_is_exported_to_run_there(tmp_path):
    # TrainingArguments(**export) refused a CPU sweep's bf16 config on that same machine
    # ("Your setup doesn't support bf16/gpu"), and accelerate's said use_cpu: false
    transformers = pytest.importorskip("transformers")
    on_cpu = {**_record(precision="bf16"), "device": {"type": "cpu", "name": "cpu"}}
    hf = training_export(on_cpu, "hf")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), **json.loads(hf.text))
    assert args.use_cpu and args.bf16
    assert "drop it to train on a GPU" in hf.not_expressed["use_cpu"]
    accelerate = training_export(on_cpu, "accelerate")
    assert accelerate.settings["use_cpu"] is True and "use_cpu" in accelerate.not_expressed
    on_gpu = {**_record(precision="bf16"), "device": {"type": "cuda", "name": "H100"}}
    assert "use_cpu" not in training_export(on_gpu, "hf").settings
    assert training_export(on_gpu, "accelerate").settings["use_cpu"] is False


@pytest.mark.parametrize("target", ["deepspeed", "torchtitan"])
def test_a_target_with_no_cpu_switch_says_the_sweep_ran_on_a_cpu(target):
    # a CPU smoke sweep's DeepSpeed config and torchtitan sections read as a GPU's tuning
    on_cpu = {**_record(precision="bf16"), "device": {"type": "cpu", "name": "cpu"}}
    note = training_export(on_cpu, target).not_expressed["device"]
    assert note.startswith("cpu: the sweep ran on a CPU") and "tune again on one" in note
    on_gpu = {**_record(precision="bf16"), "device": {"type": "cuda", "name": "H100"}}
    assert "device" not in training_export(on_gpu, target).not_expressed


def test_a_multi_process_sweep_on_a_cpu_is_exported_to_accelerate_as_multi_cpu():
    # a ddp winner over 2 gloo processes was written MULTI_GPU with use_cpu: true, and its
    # notes said "over 2 GPUs"
    accelerate = pytest.importorskip("accelerate")
    problem = {**PROBLEM, "world_size": 2}
    on_cpu = {**_record(layout="ddp"), "problem": problem, "device": {"type": "cpu"}}
    out = training_export(on_cpu, "accelerate")
    kind = out.settings["distributed_type"]
    assert kind == "MULTI_CPU" and accelerate.utils.DistributedType(kind)  # a name it takes
    assert (
        out.settings["use_cpu"] is True
        and "GPU" not in training_export(on_cpu, "hf").not_expressed["layout"]
    )
    assert "over 2 CPU processes" in training_export(on_cpu, "hf").not_expressed["layout"]
    on_gpu = {**on_cpu, "device": {"type": "cuda", "name": "H100"}}
    assert training_export(on_gpu, "accelerate").settings["distributed_type"] == "MULTI_GPU"
    assert "over 2 GPUs" in training_export(on_gpu, "hf").not_expressed["layout"]


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


def _lrs(optimizer, scheduler, steps: int) -> set[float]:
    """The lr of each of ``steps`` optimizer steps under ``scheduler``."""
    seen = set()
    for _ in range(steps):
        seen.add(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return seen


def test_the_trainer_keeps_the_constant_lr_the_step_was_measured_at(tmp_path):
    # the measured step runs AdamW at one lr throughout; the Trainer's default schedule
    # (linear, to 0 by the last step) ran every step after the first at a lower one
    transformers = pytest.importorskip("transformers")
    import torch

    out = training_export(_record(precision="bf16"), "hf")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          **json.loads(out.text))  # fmt: skip
    trainer = transformers.Trainer(model=torch.nn.Linear(2, 2), args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=50)
    assert _lrs(trainer.optimizer, trainer.lr_scheduler, 50) == {3e-4}


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


@pytest.mark.parametrize("target", ["accelerate", "deepspeed"])
def test_a_target_with_no_schedule_key_runs_the_constant_lr(target):
    # accelerate's loop is the user's, DeepSpeed runs no scheduler unless its config names one
    out = training_export(_record(), target)
    if target == "accelerate":
        assert "a constant lr (no scheduler" in out.not_expressed["optimizer"]
    else:
        pytest.importorskip("deepspeed")
        from deepspeed.runtime.config import DeepSpeedConfig

        assert DeepSpeedConfig(json.loads(out.text), mpu=None).scheduler_name is None


@pytest.mark.parametrize("compile", [True, False])
def test_torchtitan_compiles_the_decoder_blocks_alone_as_the_tuned_step_did(compile):
    # [compile] enable alone took torchtitan 0.2's default components, ["model", "loss"]: the
    # exported run compiled its loss too, which the tuned step (each block compiled) did not
    out = training_export(_record(compile=compile), "torchtitan")
    parsed = tomllib.loads(out.text)["compile"]
    assert parsed == ({"enable": True, "components": ["model"]} if compile else {"enable": False})
