"""The notes more than one training target writes in ``not_expressed``, for what it has no key
for: the sequence length and tokens per optimizer step (:func:`sequence_note`), a compile mode,
fp8 and an attention backend (:func:`common_notes`), a sweep that ran on a CPU
(:func:`cpu_note`), and FSDP2's gradients reduced in bf16 (:func:`fsdp2_reduce_note`).

Example:
    >>> notes = common_notes({"precision": "fp8", "attention_backend": "flash"})
    >>> sorted(notes), notes["attention_backend"][:38]
    (['attention_backend', 'precision'], "flash: run the model's attention under")
"""

from __future__ import annotations

from typing import Any

from autotune.export_record import measured_on_cpu
from autotune.export_text import shown
from autotune.train_record import PRECISIONS, sequence_length


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


def common_notes(config: dict[str, Any]) -> dict[str, str]:
    """The notes every training target writes for the config: a compile mode other than the
    default, fp8's float8 linears, a precision or attention backend the step does not have,
    and the SDPA backend to run the attention under.

    Example:
        >>> common_notes({"compile": True, "compile_mode": "max-autotune"})["compile_mode"]
        "max-autotune: torch.compile(block, mode='max-autotune') on each decoder block"
    """
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


_SDPA = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
         "cudnn": "CUDNN_ATTENTION"}  # fmt: skip


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
