"""A tuned training step, written for the stacks that train: Hugging Face ``TrainingArguments``,
an ``accelerate`` config file, a DeepSpeed config, torchtitan TOML sections
(:mod:`autotune.torchtitan_export`).

Each target takes what it can express; every knob it cannot (an SDPA backend in
``TrainingArguments``, fp16's first loss scale in Hugging Face's scaler, a micro-batch in an
accelerate config) is listed in ``not_expressed`` with what to do instead, never dropped
silently: in the file itself where the format allows comments (YAML, TOML), else beside it.

Every target states the batch arithmetic the same way, as a key where it has one, else as a
note (:func:`sequence_note`: ``TrainingArguments``, accelerate and DeepSpeed have no sequence
length, and the micro-batch holds only at the one it was tuned at):
    gradient_accumulation = global_batch // (micro_batch * data-parallel processes)
    tokens per optimizer step = global_batch * seq_len

Example:
    >>> record = {"config": {"micro_batch": 4, "precision": "bf16", "optimizer": "fused",
    ...           "activation_checkpointing": True, "attention_backend": "flash",
    ...           "compile": False}, "problem": {"global_batch": 16, "lr": 3e-4}}
    >>> out = training_export(record, "hf")
    >>> out.settings["gradient_accumulation_steps"], out.settings["optim"]
    (4, 'adamw_torch_fused')
    >>> sorted(out.not_expressed)
    ['attention_backend', 'seq_len', 'weight_decay']
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

TARGETS = ("hf", "accelerate", "deepspeed", "torchtitan")

# What the training-step objective's AdamW runs with (objectives/train_loop.py): every
# parameter decayed (the RMSNorm gains too), no gradient clipping before its step, and one
# lr throughout (no warmup or decay: a constant schedule where the target has a key for it).
ADAMW = {"betas": (0.9, 0.95), "weight_decay": 0.1}

#: the note of a target that leaves biases and norm weights undecayed where the step did not
_DECAY_NOTE = ("0.1 on every parameter: the tuned step decayed the RMSNorm gains too, which "
               "the Trainer leaves out (with biases); pass Trainer(optimizers=(torch.optim."
               "AdamW(model.parameters(), ...), None)) to match")  # fmt: skip


class TrainExportError(ValueError):
    """A record that is not a training step, or an unknown target."""


@dataclass
class TrainExport:
    """One target's settings, their text, and what the target could not express."""

    target: str
    settings: dict[str, Any]
    not_expressed: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        notes = comment_lines(self.not_expressed)
        if self.target == "accelerate":
            return notes + yaml.safe_dump(self.settings, sort_keys=False)
        if self.target == "torchtitan":
            from autotune.torchtitan_export import toml_text

            return notes + toml_text(self.settings)
        return json.dumps(self.settings, indent=2) + "\n"

    @property
    def notes_inline(self) -> bool:
        """Whether the file itself carries ``not_expressed`` (as comments)."""
        return self.target in ("accelerate", "torchtitan")


def shown(value: Any) -> str:
    """``value`` as one printable line: as is where it is one, else its ``repr`` (a newline in
    a comment would end it, and the rest would be read as the file's own lines).

    Example:
        >>> shown("fcfs"), shown(64), shown("a\\nb")
        ('fcfs', '64', "'a\\\\nb'")
    """
    text = str(value)
    return text if text.isprintable() else repr(text)


def comment_lines(notes: dict[str, str]) -> str:
    """``not_expressed`` as ``#`` comment lines, each note kept on its own line.

    Example:
        >>> print(comment_lines({"policy": "x\\ny: 1"}), end="")
        # not expressed: policy: 'x\\ny: 1'
    """
    return "".join(f"# not expressed: {shown(k)}: {shown(v)}\n" for k, v in notes.items())


def whole(name: str, value: Any, error: type[ValueError]) -> int:
    """``value`` as a positive whole number, else ``error`` naming it.

    Example:
        >>> whole("micro_batch", 4.0, ValueError)
        4
        >>> whole("micro_batch", 0, ValueError)
        Traceback (most recent call last):
        ...
        ValueError: micro_batch 0: not a positive whole number
    """
    number: Any = value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = int(value.strip())
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise error(f"{name} {value!r}: not a positive whole number")
    return number


def positive(name: str, value: Any, error: type[ValueError]) -> float:
    """``value`` as a finite positive number, else ``error`` naming it."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise error(f"{name} {value!r}: not a positive number")
    return number


def which_sweep(record: dict[str, Any]) -> str:
    """Which sweep an export was asked of, for its error.

    Example:
        >>> which_sweep({"study": "mm", "workload": "matmul"})
        "study 'mm' tuned matmul (--study NAME picks another)"
        >>> which_sweep({"study": "r", "workload": "replay", "replay": {"workload": None}})
        "study 'r' tuned replay of a table that records no workload (--study NAME picks another)"
        >>> which_sweep(as_recorded({"study": "t", "workload": "replay",
        ...                          "replay": {"workload": "train-step"}}))
        "study 't' tuned replay of a train-step table (--study NAME picks another)"
    """
    what = str(record.get("workload"))
    replay = record.get("replay")
    if isinstance(replay, dict):  # a replay, :func:`as_recorded`'s (its stamp as workload) too
        stamp = replay.get("workload")
        table = f"a {stamp} table" if stamp else "a table that records no workload"
        what = f"replay of {table}"
    return f"study {record.get('study')!r} tuned {what} (--study NAME picks another)"


def as_recorded(record: dict[str, Any]) -> dict[str, Any]:
    """A replay's record (``autotune.export.best_record``'s, with ``replay``) as the sweep its
    table recorded: the table's ``workload`` stamp and its problem (the recorded one, the
    replay's ``--problem`` values over it); any other record, and a replay of a table that
    records no workload, as it is.

    Example:
        >>> record = {"workload": "replay", "problem": {"table": "t.csv", "params": ["a"]},
        ...           "replay": {"workload": "train-step", "problem": {"global_batch": 16}}}
        >>> recorded = as_recorded(record)
        >>> recorded["workload"], recorded["problem"]
        ('train-step', {'global_batch': 16})
    """
    replay = record.get("replay")
    if record.get("workload") != "replay" or not isinstance(replay, dict):
        return record
    if not replay.get("workload"):
        return record
    return {**record, "workload": replay["workload"], "problem": replay.get("problem") or {}}


def replay_note(record: dict[str, Any]) -> dict[str, str]:
    """For a replay's record, the note that labels an export of it as one (a target's file has
    no other place to say that nothing was measured); nothing for a sweep that measured.

    Example:
        >>> replay_note({"workload": "replay", "label": "REPLAY of t.csv",
        ...              "replay": {"source": "replay of measurements on NVIDIA H200"}})
        {'replay': 'REPLAY of t.csv (replay of measurements on NVIDIA H200)'}
        >>> replay_note({"workload": "matmul"})
        {}
    """
    if record.get("workload") != "replay":
        return {}
    replay = record.get("replay") if isinstance(record.get("replay"), dict) else {}
    label = record.get("label") or "REPLAY of a recorded table: nothing was measured"
    source = replay.get("source")
    return {"replay": f"{label} ({source})" if source else str(label)}


def ran_config(record: dict[str, Any]) -> dict[str, Any]:
    """The config the trial ran: its tuned parameters over the untuned defaults the sweep held
    fixed (``untuned``: a space without ``precision`` ran bf16 on a GPU, not fp32), with fp16's
    first loss scale where ``--problem loss_scale_init=`` fixed it.

    Example:
        >>> ran_config({"config": {"micro_batch": 2}, "untuned": {"precision": "bf16",
        ...             "micro_batch": 8}, "problem": {"loss_scale_init": 1024}})
        {'precision': 'bf16', 'micro_batch': 2, 'loss_scale_init': 1024}
    """
    config = {**(record.get("untuned") or {}), **(record.get("config") or {})}
    problem = record.get("problem") or {}
    if "loss_scale_init" in problem and "loss_scale_init" not in config:
        config["loss_scale_init"] = problem["loss_scale_init"]
    return config


def _tuned(record: dict[str, Any]) -> tuple[dict[str, Any], int, int, float]:
    """The config (:func:`ran_config`), its micro-batch (per process), the gradient
    accumulation and the lr."""
    config, problem = ran_config(record), record.get("problem", {})
    if "micro_batch" not in config or "global_batch" not in problem:
        hint = ""
        # a replay, of a table that records no workload or (as_recorded) of a stamped one
        replayed = record.get("workload") == "replay" or isinstance(record.get("replay"), dict)
        if replayed and "micro_batch" in config:
            hint = "; replay a table without problem.global_batch with --problem global_batch=N"
        raise TrainExportError(
            "a training-stack export needs a train-step sweep (micro_batch, global_batch); "
            + which_sweep(record)
            + hint
        )
    micro = whole("micro_batch", config["micro_batch"], TrainExportError)
    total = whole("global_batch", problem["global_batch"], TrainExportError)
    lr = positive("lr", problem.get("lr", 3e-4), TrainExportError)
    shards = data_parallel(record)
    if total % (micro * shards):  # as the training step refuses it: no whole accumulation
        where = f" over {shards} data-parallel processes" if shards > 1 else ""
        raise TrainExportError(f"micro_batch {micro} does not divide global_batch {total}{where}")
    return config, micro, total // (micro * shards), lr


def world_size(record: dict[str, Any]) -> int:
    """The processes (GPUs) the tuned step ran on."""
    return whole("world_size", record.get("problem", {}).get("world_size", 1) or 1,
                 TrainExportError)  # fmt: skip


def ran_on(record: dict[str, Any]) -> str:
    """What the tuned step's processes ran on, for a note: ``N GPUs``, or ``N CPU processes``
    where the sweep ran on a CPU (gloo).

    Example:
        >>> ran_on({"problem": {"world_size": 2}, "device": {"type": "cpu"}})
        '2 CPU processes'
    """
    return f"{world_size(record)} " + ("CPU processes" if measured_on_cpu(record) else "GPUs")


def sequence_length(record: dict[str, Any]) -> int | None:
    """The sequence length the step was tuned at; None where the record lacks it (a replay
    of a table that does not record it)."""
    problem = record.get("problem", {})
    if "seq_len" not in problem:
        return None
    return whole("seq_len", problem["seq_len"], TrainExportError)


def sequence_note(record: dict[str, Any]) -> dict[str, str]:
    """The note that states the sequence length and the tokens per optimizer step, for a target
    with no key for the sequence length (or a record that lacks it).

    Example:
        >>> sequence_note({"problem": {"global_batch": 16, "seq_len": 2048}})["seq_len"][-60:]
        '(tokens per optimizer step = global_batch 16 x 2048 = 32768)'
    """
    total = record.get("problem", {}).get("global_batch")
    seq = sequence_length(record)
    if seq is None:
        note = ("not recorded: the micro-batch holds only at the sequence length it was tuned "
                f"at (tokens per optimizer step = global_batch {total} x seq_len)")  # fmt: skip
    else:
        note = (f"{seq}: the micro-batch was tuned at this sequence length and holds only "
                f"there; pack or cut the data to {seq} tokens (tokens per optimizer step = "
                f"global_batch {total} x {seq} = {int(total) * seq})")  # fmt: skip
    return {"seq_len": note}


def _loss_scale(config: dict[str, Any]) -> float:
    """fp16's first loss scale (2^16 where the sweep did not tune it)."""
    return positive("loss_scale_init", config.get("loss_scale_init", 2.0**16), TrainExportError)


def _loss_scale_set(config: dict[str, Any]) -> bool:
    """Whether the config sets fp16's first loss scale to other than the scalers' own 2^16."""
    return "loss_scale_init" in config and _loss_scale(config) != 2.0**16


def data_parallel(record: dict[str, Any]) -> int:
    """How many processes shared out the global batch (all but under tensor parallel)."""
    layout = ran_config(record).get("layout", "single")
    return 1 if layout in ("single", "tp") else world_size(record)


def _common_notes(config: dict[str, Any]) -> dict[str, str]:
    notes = {}
    if config.get("compile") and config.get("compile_mode", "default") != "default":
        mode = config["compile_mode"]
        notes.setdefault("compile_mode", f"{shown(mode)}: torch.compile(block, mode="
                         f"{mode!r}) on each decoder block")  # fmt: skip
    precision = config.get("precision", "fp32")
    if precision == "fp8":
        notes["precision"] = (
            "fp8: torchao.float8.convert_to_float8_training(model) on the decoder blocks' "
            "linears (the LM head left out), the rest under bf16 autocast"
        )
    elif precision not in PRECISIONS:
        notes["precision"] = (
            f"{shown(precision)}: not a precision of the training step ({', '.join(PRECISIONS)}); "
            "fp32 is written"
        )
    backend = config.get("attention_backend", "default")
    if backend in _SDPA:
        notes["attention_backend"] = (
            f"{backend}: run the model's attention under torch.nn.attention.sdpa_kernel("
            f"SDPBackend.{_SDPA[backend]}) (the model loaded with attn_implementation='sdpa')"
        )
    elif backend != "default":
        notes["attention_backend"] = (
            f"{shown(backend)}: not an attention backend of the training step (default, "
            f"{', '.join(_SDPA)}); nothing is set"
        )
    return notes


#: the training step's precisions (objectives/train_step.py)
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


_SDPA = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
         "cudnn": "CUDNN_ATTENTION"}  # fmt: skip


def _hf_checkpointing_name() -> str:
    """``activation_checkpointing`` where the installed transformers has it (5.x, which warns
    about the old name), else ``gradient_checkpointing`` (4.x, and no transformers here)."""
    try:
        import dataclasses

        from transformers import TrainingArguments
    except ImportError:
        return "gradient_checkpointing"
    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else ("gradient_checkpointing")
    )


#: the note of an export whose sweep ran on a CPU, where it is written to run
_CPU_NOTE = ("on: the sweep ran on a CPU, so the config is written to run there (with bf16, "
             "TrainingArguments refuses a machine without a GPU otherwise); drop it to train on "
             "a GPU, where these figures were not measured")  # fmt: skip


#: the accelerate export's note for a sweep that ran on a CPU
_ACCELERATE_CPU_NOTE = ("true: the sweep ran on a CPU, so accelerate is told to run there "
                        "(and several processes as MULTI_CPU); set it false (MULTI_GPU) to "
                        "train on GPUs, where these figures were not measured")  # fmt: skip


def cpu_note(record: dict[str, Any], target: str) -> dict[str, str]:
    """For a target with no CPU switch (DeepSpeed, torchtitan), the note that says a sweep ran
    on a CPU, so its figures are no GPU's; nothing for a sweep on a GPU, or a replay whose
    table does not record its device.

    Example:
        >>> cpu_note({"device": {"type": "cpu"}}, "torchtitan")["device"][:38]
        'cpu: the sweep ran on a CPU, so these '
        >>> cpu_note({"device": {"type": "cuda"}}, "deepspeed")
        {}
    """
    if not measured_on_cpu(record):
        return {}
    return {"device": f"cpu: the sweep ran on a CPU, so these settings were tuned there, not "
                      f"on the GPUs {target} trains on; tune again on one"}  # fmt: skip


def measured_on_cpu(record: dict[str, Any]) -> bool | None:
    """Whether the record's config was measured on a CPU; None for a replay whose table does
    not record its device (it may have been).

    Example:
        >>> measured_on_cpu({"device": {"type": "cpu"}})
        True
        >>> measured_on_cpu({"device": {}, "replay": {}}) is None
        True
    """
    kind = (record.get("device") or {}).get("type")
    if kind is None and isinstance(record.get("replay"), dict):
        return None
    return kind == "cpu"


def hf_export(record: dict[str, Any]) -> TrainExport:
    """Keyword arguments of ``transformers.TrainingArguments``:
    ``TrainingArguments(output_dir=..., **settings)``."""
    config, micro, accum, lr = _tuned(record)
    precision = config.get("precision", "fp32")
    settings: dict[str, Any] = {
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accum,
        "learning_rate": lr,
        "adam_beta1": ADAMW["betas"][0],
        "adam_beta2": ADAMW["betas"][1],
        "weight_decay": ADAMW["weight_decay"],
        "max_grad_norm": 0.0,  # the tuned step does not clip; 0 turns the Trainer's 1.0 off
        # the tuned step's lr is constant (no warmup, no decay); the Trainer's default is linear
        # decay to 0. "constant" (get_constant_schedule) ignores the warmup settings
        "lr_scheduler_type": "constant",
        "optim": "adamw_torch_fused" if config.get("optimizer") == "fused" else "adamw_torch",
        _hf_checkpointing_name(): bool(config.get("activation_checkpointing", False)),
        "torch_compile": bool(config.get("compile", False)),
        "bf16": precision in ("bf16", "fp8"),
        "fp16": precision == "fp16",
    }
    if precision == "tf32":
        settings["tf32"] = True
    notes = {**sequence_note(record), **_common_notes(config), "weight_decay": _DECAY_NOTE}
    if measured_on_cpu(record):  # TrainingArguments refuses bf16 without a GPU unless told
        settings["use_cpu"] = True
        notes["use_cpu"] = _CPU_NOTE
    if config.get("compile") and config.get("compile_mode", "default") != "default":
        settings["torch_compile_mode"] = config["compile_mode"]
        notes.pop("compile_mode")
    layout = config.get("layout", "single")
    if layout == "fsdp2":
        settings["fsdp"] = "full_shard"
        settings["fsdp_config"] = {
            "fsdp_version": 2,
            "reshard_after_forward": bool(config.get("reshard_after_forward", True)),
        }
        notes.update(fsdp2_reduce_note(precision, "hf"))
    if layout != "single":
        notes["layout"] = (
            f"{layout} over {ran_on(record)}: launch with torchrun --nproc-per-node "
            f"{world_size(record)}" + ("; tensor parallel is the model's own tp_plan, not a "
                                        "TrainingArguments field" if layout == "tp" else "")
        )  # fmt: skip
    if precision == "fp16" and _loss_scale_set(config):
        notes["loss_scale_init"] = (
            f"{_loss_scale(config):g}: Hugging Face's GradScaler starts at 2^16; set "
            "init_scale on the Trainer's accelerator scaler to match"
        )
    return TrainExport("hf", settings, notes)


#: the FSDP2 MixedPrecisionPolicy the tuned step ran under bf16 (objectives/train_layouts.py):
#: torch dtype names, as accelerate's FullyShardedDataParallelPlugin takes them (torch.<name>)
FSDP2_POLICY = {"param_dtype": "bfloat16", "reduce_dtype": "float32"}

#: how each target can be given :data:`FSDP2_POLICY`, which neither has a file key for
_FSDP2_POLICY_HOW = {
    "hf": "after trainer = Trainer(...), before trainer.train(), set trainer.accelerator.state."
    "fsdp_plugin.mixed_precision_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, "
    "reduce_dtype=torch.float32)",
    "accelerate": "pass Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin("
    "mixed_precision_policy={'param_dtype': torch.bfloat16, 'reduce_dtype': torch.float32}))",
}


def fsdp2_reduce_note(precision: str, target: str) -> dict[str, str]:
    """For a bf16 FSDP2 winner, the note that the target's FSDP2 reduces gradients in bf16
    (accelerate's ``mixed_precision`` sets ``MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=bf16)``, for ``TrainingArguments`` too, and no key of either sets another)
    where the tuned step reduced them in fp32, with how to match it; nothing otherwise.

    Example:
        >>> fsdp2_reduce_note("bf16", "accelerate")["reduce_dtype"][:46]
        'bfloat16: accelerate reduces FSDP2 gradients i'
        >>> fsdp2_reduce_note("fp32", "hf")
        {}
    """
    if precision != "bf16":
        return {}
    return {"reduce_dtype": (
        "bfloat16: accelerate reduces FSDP2 gradients in bf16 (its bf16 MixedPrecisionPolicy "
        "has reduce_dtype bfloat16, and no config key sets another) where the tuned step "
        f"reduced them in {FSDP2_POLICY['reduce_dtype']}; {_FSDP2_POLICY_HOW[target]}. "
        "accelerate also runs the forward under bf16 autocast, which the tuned FSDP2 step did "
        "not (its policy cast the weights alone)"
    )}  # fmt: skip


def accelerate_export(record: dict[str, Any]) -> TrainExport:
    """An ``accelerate launch --config_file`` YAML for one machine and one process."""
    config, micro, accum, lr = _tuned(record)
    precision = config.get("precision", "fp32")
    mixed = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}.get(precision, "no")
    layout = config.get("layout", "single")
    many = "MULTI_CPU" if measured_on_cpu(record) else "MULTI_GPU"  # processes over gloo
    distributed = {"single": "NO", "ddp": many, "fsdp2": "FSDP", "tp": many}
    settings: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": distributed.get(layout, "NO"),
        "mixed_precision": mixed,
        "num_machines": 1,
        "num_processes": world_size(record),
        "machine_rank": 0,
        "gpu_ids": "all",
        "use_cpu": bool(measured_on_cpu(record)),
        "downcast_bf16": "no",
        "main_training_function": "main",
        "debug": False,
    }
    if config.get("compile"):
        settings["dynamo_config"] = {
            "dynamo_backend": "INDUCTOR",
            "dynamo_mode": config.get("compile_mode", "default"),
        }
    if precision == "fp8":
        settings["fp8_config"] = {"backend": "AO"}  # torchao's float8 training
    if layout == "fsdp2":
        settings["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_reshard_after_forward": bool(config.get("reshard_after_forward", True)),
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        }
    notes = {
        "micro_batch": f"{micro}: the DataLoader's batch_size",
        "gradient_accumulation_steps": f"{accum}: Accelerator(gradient_accumulation_steps={accum})",
        **sequence_note(record),
        "optimizer": f"torch.optim.AdamW(model.parameters(), lr={lr:g}, betas={ADAMW['betas']}, "
        f"weight_decay={ADAMW['weight_decay']}, fused={config.get('optimizer') == 'fused'}), "
        "no gradient clipping (the tuned step does not clip), a constant lr (no scheduler: "
        "the tuned step has no warmup or decay)",
        **_common_notes(config),
    }
    if config.get("activation_checkpointing"):
        notes["activation_checkpointing"] = "model.gradient_checkpointing_enable()"
    if precision == "tf32":
        notes["precision"] = "tf32: torch.backends.cuda.matmul.allow_tf32 = True"
    if measured_on_cpu(record):
        notes["use_cpu"] = _ACCELERATE_CPU_NOTE
    if precision == "fp16" and _loss_scale_set(config):
        notes["loss_scale_init"] = (
            f"{_loss_scale(config):g}: GradScaler(init_scale=...) through "
            "Accelerator(kwargs_handlers=[GradScalerKwargs(init_scale=...)])"
        )
    notes.pop("compile_mode", None)  # dynamo_mode holds it
    if layout == "fsdp2":
        notes.update(fsdp2_reduce_note(precision, "accelerate"))
    if precision == "fp8":
        notes.pop("precision")  # mixed_precision fp8 with the AO backend holds it
    if layout == "tp":
        n = world_size(record)
        # without it prepare() wraps the model in DDP, which refuses its DTensor weights
        settings["parallelism_config"] = {"parallelism_config_tp_size": n}
        notes["layout"] = _accelerate_tp_note(record, n)
    return TrainExport("accelerate", settings, notes)


def _accelerate_tp_note(record: dict[str, Any], n: int) -> str:
    """How a tensor-parallel winner trains under accelerate: the launcher hands ``Accelerator()``
    the ``parallelism_config`` tp size, so ``prepare()`` leaves the model to its own sharding
    instead of wrapping it in DDP; the model must arrive sharded, and say so."""
    note = (
        f"tp over {ran_on(record)}: parallelism_config_tp_size {n} has Accelerator() build a "
        "tensor-parallel mesh, so prepare() does not wrap the model in DDP; shard the model "
        "before prepare() with torch.distributed.tensor.parallel.parallelize_module on "
        "accelerator.torch_device_mesh['tp'] (q/k/v and gate/up column-wise, output and down "
        f"row-wise) and set model.tp_size = {n}, which prepare() checks"
    )
    if measured_on_cpu(record):
        note += (
            "; accelerate trains tensor parallel only on GPUs (its ParallelismConfig refuses "
            "MULTI_CPU): set use_cpu false and distributed_type MULTI_GPU"
        )
    return note


def deepspeed_export(record: dict[str, Any]) -> TrainExport:
    """A DeepSpeed config (``deepspeed.initialize(config=...)``) for the sweep's GPUs."""
    config, micro, accum, lr = _tuned(record)
    precision = config.get("precision", "fp32")
    layout = config.get("layout", "single")
    settings: dict[str, Any] = {
        # train_batch_size = micro * accumulation * data-parallel size, as DeepSpeed checks
        "train_batch_size": micro * accum * data_parallel(record),
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "gradient_clipping": 0.0,  # the tuned step does not clip; DeepSpeed's default is 1.0
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": lr,
                "betas": list(ADAMW["betas"]),
                "weight_decay": ADAMW["weight_decay"],
                "torch_adam": config.get("optimizer") != "fused",
            },  # fmt: skip
        },
    }
    notes = {**sequence_note(record), **_common_notes(config), **cpu_note(record, "DeepSpeed")}
    if precision in _AUTOCAST:
        settings["torch_autocast"] = deepspeed_autocast(precision)
        if layout == "fsdp2":
            notes["precision"] = f"{precision}: {_ZERO3_PRECISION_NOTE}"
        if precision == "fp16" and _loss_scale_set(config):
            notes["loss_scale_init"] = (
                f"{_loss_scale(config):g}: DeepSpeed's torch_autocast GradScaler starts at 2^16 "
                "and takes no initial scale"
            )
    elif precision == "tf32":
        notes["precision"] = "tf32: torch.backends.cuda.matmul.allow_tf32 = True"
    if config.get("optimizer") == "fused":
        notes["optimizer"] = "fused: DeepSpeed's FusedAdam (its own fused kernel, torch_adam off)"
    if config.get("activation_checkpointing"):
        notes["activation_checkpointing"] = "model.gradient_checkpointing_enable()"
    if config.get("compile"):
        notes["compile"] = "engine.compile() after deepspeed.initialize"
    if layout == "fsdp2":
        # ZeRO-3 shards weights, gradients and optimizer state as FSDP2 does
        settings["zero_optimization"] = {"stage": 3}
        notes["layout"] = (
            f"fsdp2 over {ran_on(record)}: as ZeRO stage 3 (DeepSpeed's own sharding, not "
            f"fully_shard); {_deepspeed_launch(record)}"
        )
        if not config.get("reshard_after_forward", True):
            notes["reshard_after_forward"] = (
                "false: the tuned step kept each block's weights gathered from its forward to "
                "its backward; ZeRO stage 3 gathers them again for the backward (it has no "
                "such switch)"
            )
    elif layout == "tp":
        n = world_size(record)
        settings["tensor_parallel"] = {"autotp_size": n}  # one data-parallel replica of N ranks
        # without an mpu, DeepSpeed's batch check counts every rank of the launch, tensor
        # parallel ones too (micro x accumulation x N), with one only the data-parallel ones:
        # left out, it derives the size from the two either way
        del settings["train_batch_size"]
        notes["layout"] = (
            f"tp over {ran_on(record)}: as AutoTP (tensor_parallel.autotp_size {n}), "
            f"launch with deepspeed --num_gpus {n}; AutoTP shards by the model's tp_plan or its "
            "own rules, where the tuned step sharded q/k/v and gate/up column-wise, the "
            "attention output and down projection row-wise, and kept the embedding, norms and "
            "LM head whole; train_batch_size is left for DeepSpeed to derive (without an mpu "
            f"it counts all {n} ranks)"
        )
    elif layout == "ddp":
        notes["layout"] = f"ddp over {ran_on(record)}: {_deepspeed_launch(record)}"
    return TrainExport("deepspeed", settings, notes)


#: the tuned step's autocast dtype per precision (fp8: its float8 linears, the rest bf16)
_AUTOCAST = {"bf16": "bfloat16", "fp8": "bfloat16", "fp16": "float16"}

#: what DeepSpeed's ZeRO-3 under torch_autocast does otherwise than the tuned step's FSDP2
_ZERO3_PRECISION_NOTE = (
    "as torch_autocast over fp32 weights; the tuned step's FSDP2 gathered each block's weights "
    "in half precision and ran the whole block in it (MixedPrecisionPolicy, no autocast), "
    "reducing gradients in fp32; ZeRO stage 3 under torch_autocast gathers the fp32 weights "
    "(twice that traffic and gathered memory) and autocasts; listing torch.nn.Linear in "
    "lower_precision_safe_modules would gather them in half precision but reduce their "
    "gradients in it too"
)


def deepspeed_autocast(precision: str) -> dict[str, Any]:
    """DeepSpeed's ``torch_autocast`` section for a half-precision ``precision``: autocast over
    fp32 weights, as the tuned step ran (DeepSpeed's own ``bf16``/``fp16`` sections hold the
    weights in half precision, with an fp32 copy in the optimizer). No module is "lower
    precision safe", so DeepSpeed reduces every gradient in fp32, as the step did (a listed
    module's gradients are reduced, and under ZeRO-3 its weights gathered, in ``dtype``).

    Example:
        >>> deepspeed_autocast("bf16")
        {'enabled': True, 'dtype': 'bfloat16', 'lower_precision_safe_modules': []}
    """
    return {"enabled": True, "dtype": _AUTOCAST[precision], "lower_precision_safe_modules": []}


def _deepspeed_launch(record: dict[str, Any]) -> str:
    """How many processes to launch a data-parallel DeepSpeed config on: its train_batch_size
    counts them, and DeepSpeed's launcher takes every GPU of the node unless told.

    Example:
        >>> _deepspeed_launch({"problem": {"world_size": 2}, "device": {"type": "cuda"}})
        'launch with deepspeed --num_gpus 2 (train_batch_size counts 2 processes)'
    """
    n = world_size(record)
    return f"launch with deepspeed --num_gpus {n} (train_batch_size counts {n} processes)"


def training_export(record: dict[str, Any], target: str) -> TrainExport:
    """The export of a best-config record (``autotune.export.best_record``) for ``target``; a
    replay's as the sweep its table recorded (:func:`as_recorded`), labelled as a replay
    (:func:`replay_note`)."""
    from autotune.torchtitan_export import torchtitan_export

    makers = {"hf": hf_export, "accelerate": accelerate_export, "deepspeed": deepspeed_export,
              "torchtitan": torchtitan_export}  # fmt: skip
    if target not in makers:
        raise TrainExportError(f"unknown training target {target!r}; choose {', '.join(TARGETS)}")
    recorded = as_recorded(record)
    # the optimizer, its betas and weight decay, the untuned knobs: the training step's own,
    # which another workload (a file's objective with a micro_batch too) never ran
    if recorded.get("workload") not in (None, "train-step", "replay"):
        raise TrainExportError("a training-stack export needs a train-step sweep; "
                               + which_sweep(recorded))  # fmt: skip
    exported = makers[target](recorded)
    exported.not_expressed = {**replay_note(record), **exported.not_expressed}
    return exported
