"""A tuned training step, written for the stacks that train: Hugging Face ``TrainingArguments``,
an ``accelerate`` config file, a DeepSpeed config, torchtitan TOML sections
(:mod:`autotune.torchtitan_export`).

:func:`training_export` picks the target; each has its own module (:mod:`autotune.hf_export`,
:mod:`autotune.accelerate_export`, :mod:`autotune.deepspeed_export`,
:mod:`autotune.torchtitan_export`) over the record's reading (:mod:`autotune.train_record`,
:mod:`autotune.export_record`), the notes they share (:mod:`autotune.train_notes`) and the
export's text (:mod:`autotune.export_text`).

Each target takes what it can express; every knob it cannot (an SDPA backend in
``TrainingArguments``, fp16's first loss scale in Hugging Face's scaler, a micro-batch in an
accelerate config) is listed in ``not_expressed`` with what to do instead, never dropped
silently: in the file itself where the format allows comments (YAML, TOML), else beside it.

Every target states the batch arithmetic the same way, as a key where it has one, else as a
note (:func:`autotune.train_notes.sequence_note`: ``TrainingArguments``, accelerate and
DeepSpeed have no sequence length, and the micro-batch holds only at the one it was tuned at):
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

from typing import Any

from autotune.accelerate_export import accelerate_export
from autotune.deepspeed_export import deepspeed_export
from autotune.export_record import as_recorded, replay_note, which_sweep
from autotune.export_text import TrainExport
from autotune.hf_export import hf_export
from autotune.train_record import TrainExportError

TARGETS = ("hf", "accelerate", "deepspeed", "torchtitan")
#: the training step's knobs these exports read (a replay's row holds those it did not search)
TRAIN_KNOBS = (
    "micro_batch", "precision", "activation_checkpointing", "attention_backend", "optimizer",
    "compile", "compile_mode", "layout", "reshard_after_forward",
)  # fmt: skip


def training_export(record: dict[str, Any], target: str) -> TrainExport:
    """The export of a best-config record (``autotune.export.best_record``) for ``target``; a
    replay's as the sweep its table recorded (:func:`as_recorded`), labelled as a replay
    (:func:`replay_note`)."""
    from autotune.torchtitan_export import torchtitan_export

    makers = {"hf": hf_export, "accelerate": accelerate_export, "deepspeed": deepspeed_export,
              "torchtitan": torchtitan_export}  # fmt: skip
    if target not in makers:
        raise TrainExportError(f"unknown training target {target!r}; choose {', '.join(TARGETS)}")
    recorded = as_recorded(record, TRAIN_KNOBS)
    # the optimizer, its betas and weight decay, the untuned knobs: the training step's own,
    # which another workload (a file's objective with a micro_batch too) never ran
    if recorded.get("workload") not in (None, "train-step", "replay"):
        raise TrainExportError("a training-stack export needs a train-step sweep; "
                               + which_sweep(recorded))  # fmt: skip
    exported = makers[target](recorded)
    exported.not_expressed = {**replay_note(record), **exported.not_expressed}
    return exported
