"""Training-step objective: tokens per second and peak memory of a Llama-style training loop.

Each trial builds a fresh :class:`~autotune.kernels.llama.Llama` with random weights and AdamW,
runs ``warmup_steps`` untimed then ``steps`` timed optimizer steps on one fixed random batch
(so the loss falls as the model memorises it), and frees everything afterwards
(:mod:`autotune.objectives.train_loop`). The global batch is fixed by the problem; the config
only changes how it is computed:

    accumulation = global_batch // (micro_batch * data-parallel processes)
    tokens per optimizer step = global_batch * seq_len

``--problem world_size=N`` trains each trial on N spawned processes of the node (N GPUs over
NCCL; on a CPU, gloo), in the config's ``layout`` (ddp | fsdp2 | tp,
:mod:`autotune.objectives.train_layouts`); tokens/s counts all of them.

Each config's loss trajectory must match the untuned default's on the same model, data and
steps (one reference run per process): a config whose loss falls by more than
:data:`NUMERICS_TOLERANCE` less (or more) than the reference's is ``wrong_result``, with the
optimizer steps its loss scaler skipped counted (``skipped_steps``); NaN/inf and blow-ups
still prune at once. ``--problem check_numerics=false`` turns the gate off, ``model=760m``
takes a preset size (:data:`MODEL_PRESETS`). MFU is over the device's dense bf16 peak.

Tunables (``config``): ``micro_batch``, ``precision`` (fp32 | tf32 | bf16 | fp16 | fp8: torchao's
float8 linears in the blocks, the rest under bf16 autocast),
``activation_checkpointing``, ``attention_backend`` (default | math | flash | efficient | cudnn),
``optimizer`` (fused | foreach AdamW), ``compile`` and ``compile_mode`` (default |
max-autotune-no-cudagraphs | reduce-overhead, which adds CUDA graphs), ``layout`` and
``reshard_after_forward`` (FSDP2). ``loss_scale_init`` (fp16's first dynamic loss scale) is
not searched: the problem fixes it (2^16 by default). Keys left out take
:meth:`TrainStepObjective.default_config`'s values. Compile time is reported (``compile_s``)
and spent inside the trial's time, but not counted in tokens/s.

Example:
    >>> obj = TrainStepObjective({"vocab": 64, "d_model": 32, "n_layers": 1, "n_heads": 2,
    ...     "seq_len": 16, "global_batch": 4, "steps": 2, "warmup_steps": 1, "device": "cpu"})
    >>> m = obj.evaluate({"micro_batch": 2})
    >>> m.values["tokens_per_s"] > 0, m.metrics["accumulation"]
    (True, 2)
    >>> obj.close()
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from autotune.device import detect_device, host_memory_bytes, read_telemetry
from autotune.device_peaks import bf16_peak_flops
from autotune.failures import Infeasible, WrongResult
from autotune.kernels.llama import LlamaConfig, flops_per_token, param_count
from autotune.measurement import Measurement
from autotune.objectives import train_layouts, train_memory
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.objectives.train_loop import (
    ATTENTION_BACKENDS,
    COMPILE_MODES,
    LoopResult,
    Placement,
    TrainConfig,
    TrainJob,
    release,
    run_steps,
)

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
#: float8 tensor cores: compute capability 8.9 (Ada) and later
FP8_MIN_CAPABILITY = (8, 9)
OPTIMIZERS = ("fused", "foreach")
#: Every key a config may hold (a config from an older study may hold loss_scale_init).
CONFIG_KEYS = (
    "micro_batch",
    "precision",
    "activation_checkpointing",
    "attention_backend",
    "optimizer",
    "compile",
    "compile_mode",
    "layout",
    "reshard_after_forward",
    "loss_scale_init",
)


# The numerics gate: a config trains the same model when its loss falls by the reference run's
# descent D (first loss - last loss, same model, data and steps, the untuned default config)
# within this share of D. Configs that train the same model land within a few percent of D
# (bf16 against fp32 on the CPU's default problem: 0.02% of D); each skipped optimizer step
# costs about D / steps, so 25% admits the first steps fp16's dynamic loss scaler skips (2 of
# 13) and fails a run that skips a quarter of its steps or trains something else.
NUMERICS_TOLERANCE = 0.25

# Problem keys with a default; the model sizes and global_batch have none.
_PROBLEM_DEFAULTS: dict[str, Any] = {
    "lr": 3e-4, "steps": 10, "warmup_steps": 3, "seed": 0, "world_size": 1,
}  # fmt: skip

#: ``--problem model=NAME``: Llama-style shapes (a 32000-token vocabulary, embedding and head
#: untied, SwiGLU); the parameters each one has, counted by ``param_count``: 125m 134M,
#: 350m 369M, 760m 778M, 1b 941M, 1.3b 1.35B, 7b 6.7B. 760m has GPT-3's heads of 96; 1b has
#: heads of 128, as Llama's own sizes (16 layers of width 2048, as Llama 3.2 1B).
MODEL_PRESETS: dict[str, dict[str, int]] = {
    "125m": {"vocab": 32000, "d_model": 768, "n_layers": 12, "n_heads": 12},
    "350m": {"vocab": 32000, "d_model": 1024, "n_layers": 24, "n_heads": 16},
    "760m": {"vocab": 32000, "d_model": 1536, "n_layers": 24, "n_heads": 16},
    "1b": {"vocab": 32000, "d_model": 2048, "n_layers": 16, "n_heads": 16},
    "1.3b": {"vocab": 32000, "d_model": 2048, "n_layers": 24, "n_heads": 16},
    "7b": {"vocab": 32000, "d_model": 4096, "n_layers": 32, "n_heads": 32},
}
_PROBLEM_REQUIRED = ("vocab", "d_model", "n_layers", "n_heads", "seq_len", "global_batch")


class TrainStepObjective(Objective):
    """Throughput and peak memory of full training steps (forward, backward, AdamW)."""

    name: ClassVar[str] = "train-step"
    space: ClassVar[str] = "train_step.yaml"
    directions: ClassVar[dict[str, str]] = {
        "tokens_per_s": "maximize",
        "peak_memory_gb": "minimize",
    }

    @classmethod
    def slo_metrics(cls) -> tuple[str, ...]:
        """The step's time and the peak memory (on a CPU only where the peak resident set can
        be reset and read: a limit on it breaks elsewhere)."""
        return ("peak_memory_gb", "step_ms")

    @classmethod
    def resolve_problem(cls, problem: dict[str, Any]) -> dict[str, Any]:
        """Expand ``model=NAME`` (one of :data:`MODEL_PRESETS`) into the sizes it stands for.

        Example:
            >>> TrainStepObjective.resolve_problem({"model": "350m", "d_model": 128})["d_model"]
            1024
        """
        name = problem.get("model") or ""
        if not name:
            return problem
        if name not in MODEL_PRESETS:
            raise ValueError(f"model={name!r} is not one of {', '.join(MODEL_PRESETS)}")
        return {**problem, **MODEL_PRESETS[name]}

    @classmethod
    def predict_memory(cls, problem: dict[str, Any], config: dict[str, Any]) -> float | None:
        """The memory model's peak for this config (:mod:`autotune.objectives.train_memory`);
        None for a config it cannot read."""
        p = cls.resolve_problem(problem)
        try:
            cfg = LlamaConfig(vocab=int(p["vocab"]), d_model=int(p["d_model"]),
                              n_layers=int(p["n_layers"]), n_heads=int(p["n_heads"]),
                              seq_len=int(p["seq_len"]))  # fmt: skip
            return train_memory.estimate(
                cfg,
                micro_batch=int(config.get("micro_batch", 1)),
                precision=str(config.get("precision", "fp32")),
                attention_backend=str(config.get("attention_backend", "default")),
                checkpointing=bool(config.get("activation_checkpointing", False)),
                layout=str(config.get("layout", "single")),
                world_size=int(p.get("world_size", 1)),
                reshard_after_forward=bool(config.get("reshard_after_forward", True)),
                compiled=bool(config.get("compile", False)),
            ).total
        except (KeyError, ValueError, TypeError):
            return None

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(self.resolve_problem(problem))
        missing = [key for key in _PROBLEM_REQUIRED if key not in self.problem]
        if missing:
            raise ValueError(f"train-step problem lacks {', '.join(missing)}")
        for key, value in _PROBLEM_DEFAULTS.items():
            self.problem.setdefault(key, value)
        p = self.problem
        # optional "device": "auto" | "cuda" | "cpu"
        info = detect_device(p.get("device", "auto"))
        self.device_name = info.name
        self.device = (
            torch.device("cuda", info.index) if info.type == "cuda" else torch.device("cpu")
        )
        self.model_config = LlamaConfig(
            vocab=int(p["vocab"]),
            d_model=int(p["d_model"]),
            n_layers=int(p["n_layers"]),
            n_heads=int(p["n_heads"]),
            seq_len=int(p["seq_len"]),
        )
        self.global_batch = int(p["global_batch"])
        #: check every trial's loss trajectory against the default config's (numerics gate)
        self.check_numerics = bool(p.get("check_numerics", True))
        self._reference: list[float] | None = None
        self._reference_running = False
        self._reference_error = ""
        #: processes (GPUs) each trial trains on; over 1, the config's layout shares them out
        self.world_size = int(p["world_size"])
        #: fp16's first dynamic loss scale: fixed, not searched (GradScaler adapts it within a
        #: few steps; the numerics gate counts the steps it skips)
        self.loss_scale_init = float(p.get("loss_scale_init", 2.0**16))
        self.steps = int(p["steps"])
        self.warmup_steps = int(p["warmup_steps"])
        for key, least in (("global_batch", 1), ("steps", 1), ("warmup_steps", 0)):
            if int(p[key]) < least:
                raise ValueError(f"{key}={p[key]} must be {least} or more")
        # its tokens are drawn whole on the host: global_batch=1e8 asked for 48 GiB at once
        train_memory.check_token_batch(self.global_batch, self.model_config.seq_len,
                                       host_memory_bytes())  # fmt: skip
        if self.world_size < 1:
            raise ValueError(f"world_size must be at least 1, not {self.world_size}")
        # every trial failed on these (or every config was ruled out), and the sweep ended
        # "no trial succeeded" with exit 1 instead of naming the value
        # model=7b on a 24-GiB CPU: every config refused by its predicted peak, exit 1
        where = "this CPU" if info.type == "cpu" else f"this GPU ({info.name})"
        train_memory.check_state_fits(self.model_config, self.world_size, info.total_memory,
                                      where)  # fmt: skip
        if not float(p["lr"]) > 0:
            raise ValueError(f"lr={p['lr']} must be positive")
        if not self.loss_scale_init > 0:
            raise ValueError(f"loss_scale_init={p['loss_scale_init']} must be positive")

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        """A ~134M-parameter model on CUDA; a ~0.6M one on the CPU (a trial in about a second).

        Example:
            >>> TrainStepObjective.default_problem({"type": "cpu"})["d_model"]
            128
        """
        if device.get("type") == "cuda":
            # 32 sequences x 1024 tokens = 32768 tokens per optimizer step
            return {
                "model": "", "vocab": 32000, "d_model": 768, "n_layers": 12, "n_heads": 12,
                "seq_len": 1024, "global_batch": 32, "lr": 3e-4, "steps": 10, "warmup_steps": 3,
                "seed": 0, "check_numerics": True, "world_size": 1, "loss_scale_init": 65536.0,
            }  # fmt: skip
        # 8 sequences x 64 tokens = 512 tokens per optimizer step
        return {
            "model": "", "vocab": 512, "d_model": 128, "n_layers": 2, "n_heads": 4,
            "seq_len": 64, "global_batch": 8, "lr": 1e-3, "steps": 10, "warmup_steps": 3,
            "seed": 0, "check_numerics": True, "world_size": 1, "loss_scale_init": 65536.0,
        }  # fmt: skip

    def default_config(self) -> dict[str, Any]:
        """What a practitioner runs untuned: bf16 autocast where the device has it (a CUDA GPU
        with bf16; fp32 on a CPU, where autocast only slows a step), PyTorch's default SDPA
        dispatch, fused AdamW, no checkpointing, no compile, and the largest power-of-two
        micro-batch up to 8 that divides the global batch (the shipped space's micro-batches are
        powers of two: a global batch of 12 runs 4 x 3, which the sweep measures first, where
        6 x 2 lay outside it and left the sweep without its default).

        Example:
            >>> TrainStepObjective({"vocab": 64, "d_model": 32, "n_layers": 1, "n_heads": 2,
            ...     "seq_len": 16, "global_batch": 12, "device": "cpu"}).default_config()
            ... # doctest: +NORMALIZE_WHITESPACE
            {'micro_batch': 4, 'precision': 'fp32', 'activation_checkpointing': False,
             'attention_backend': 'default', 'optimizer': 'fused', 'compile': False}
        """
        bf16 = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
        layout = "single" if self.world_size == 1 else "ddp"
        share = self.global_batch // self.world_size if layout == "ddp" else self.global_batch
        config = {
            "micro_batch": max(d for d in (1, 2, 4, 8) if share % d == 0),
            "precision": "bf16" if bf16 else "fp32",
            "activation_checkpointing": False,
            "attention_backend": "default",
            "optimizer": "fused",
            "compile": False,
        }
        if self.world_size > 1:  # DDP: what an untuned multi-GPU run uses
            config["layout"] = layout
        return config

    def reference_configs(self) -> dict[str, dict[str, Any]]:
        """Further untuned rows a report shows beside the default: the plain fp32 run (math
        attention, foreach AdamW), which the default must not be judged against alone."""
        return {
            "fp32": {
                **self.default_config(),
                "precision": "fp32",
                "attention_backend": "math",
                "optimizer": "foreach",
            },  # fmt: skip
        }

    def config_keys(self) -> tuple[str, ...]:
        """Every knob :data:`CONFIG_KEYS` names."""
        return CONFIG_KEYS

    def parse_config(self, config: dict[str, Any]) -> TrainConfig:
        """Fill ``config`` from the defaults and check it.

        Raises:
            Infeasible: unknown keys, values outside their choices, a micro_batch that does
                not divide each process's share of global_batch, or a layout that cannot run
                this model on ``world_size`` processes.
        """
        merged = {**self.default_config(), **config}
        unknown = sorted(set(merged) - set(CONFIG_KEYS))
        if unknown:
            raise Infeasible(f"unknown train-step config keys: {', '.join(unknown)}")
        choices = {
            "precision": PRECISIONS,
            "attention_backend": tuple(ATTENTION_BACKENDS),
            "optimizer": OPTIMIZERS,
            "compile_mode": COMPILE_MODES,
            "layout": train_layouts.LAYOUTS,
        }
        merged.setdefault("compile_mode", "default")
        merged.setdefault("layout", "single" if self.world_size == 1 else "ddp")
        for key, allowed in choices.items():
            if merged[key] not in allowed:
                raise Infeasible(f"{key}={merged[key]!r} is not one of {', '.join(allowed)}")
        layout = merged["layout"]
        train_layouts.check_layout(layout, self.world_size, self.model_config, merged["precision"])
        shards = train_layouts.data_parallel(layout, self.world_size)
        micro_batch = int(merged["micro_batch"])
        if micro_batch <= 0 or self.global_batch % (micro_batch * shards):
            where = f" over {shards} data-parallel processes" if shards > 1 else ""
            raise Infeasible(
                f"micro_batch={micro_batch} does not divide global_batch={self.global_batch}{where}"
            )
        if (
            merged["precision"] == "bf16"
            and self.device.type == "cuda"
            and not torch.cuda.is_bf16_supported()
        ):
            raise Infeasible(f"bf16 is not supported on {self.device_name}")
        fp8 = merged["precision"] == "fp8"
        cuda = self.device.type == "cuda"
        if fp8 and cuda and torch.cuda.get_device_capability(self.device) < FP8_MIN_CAPABILITY:
            raise Infeasible(f"fp8 matmuls need compute capability 8.9+: {self.device_name}")
        if merged["precision"] == "fp8" and layout in ("fsdp2", "tp"):
            raise Infeasible(f"fp8 training is not wired for {layout}: use ddp")
        if merged["compile_mode"] == "reduce-overhead" and self.device.type != "cuda":
            raise Infeasible("compile_mode='reduce-overhead' captures CUDA graphs: CUDA only")
        loss_scale_init = float(merged.get("loss_scale_init", self.loss_scale_init))
        if not loss_scale_init > 0:
            raise Infeasible(f"loss_scale_init={loss_scale_init} must be positive")
        return TrainConfig(
            micro_batch=micro_batch,
            precision=merged["precision"],
            activation_checkpointing=bool(merged["activation_checkpointing"]),
            attention_backend=merged["attention_backend"],
            optimizer=merged["optimizer"],
            compile=bool(merged["compile"]),
            compile_mode=str(merged["compile_mode"]),
            layout=layout,
            reshard_after_forward=bool(merged.get("reshard_after_forward", True)),
            loss_scale_init=loss_scale_init,
        )

    def job(self, tc: TrainConfig) -> TrainJob:
        """What each process trains for config ``tc``."""
        p = self.problem
        return TrainJob(
            model=self.model_config, global_batch=self.global_batch, lr=float(p["lr"]),
            seed=int(p["seed"]), steps=self.steps, warmup_steps=self.warmup_steps, config=tc,
        )  # fmt: skip

    def run(self, tc: TrainConfig, report: Reporter) -> LoopResult:
        """Train ``tc`` here (one device) or on ``world_size`` spawned processes."""
        if self.world_size == 1:
            return run_steps(self.job(tc), Placement(self.device), report)
        from autotune.objectives.train_parallel import launch

        result = launch(self.job(tc), self.world_size, self.device.type)
        for index, loss in enumerate(result.losses):  # after the fact: the ranks check blow-ups
            report(index, loss)
        return result

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        """Train ``warmup_steps + steps`` steps (see :func:`~autotune.objectives.train_loop.
        run_steps`), measure the timed ones, check the numerics.

        ``report(step, loss)`` is called after every optimizer step, warm-up included, with
        ``step`` counted from 0 over all of them; the time it takes is not measured.

        Raises:
            Infeasible: see :meth:`parse_config`; fused AdamW on a device without its kernel.
            Diverged: the loss is NaN/inf or above 10 * ln(vocab), or ``report`` said to stop.
            WrongResult: the loss trajectory is not the reference's (the numerics gate).
            torch.cuda.OutOfMemoryError: on CUDA, left for the worker to classify.
            RuntimeError: e.g. an attention backend that cannot run these inputs.
        """
        tc = self.parse_config(config)
        # the untuned default (a sweep's trial 0) is its own reference: the reference run would
        # train the same config on the same model and data again (the same losses), which
        # doubled trial 0's time
        own_reference = False
        if self.check_numerics and not self._reference_running and self._reference is None:
            if self._is_default(tc):
                own_reference = True
            else:
                try:  # before this trial's model exists: the two never share the device's memory
                    self.reference_losses()
                except Exception as exc:  # noqa: BLE001 - the trial runs on, numerics unchecked
                    self._reference = []
                    self._reference_error = f"the reference run failed: {type(exc).__name__}"
        cfg = self.model_config
        result = self.run(tc, report)
        if own_reference:  # only a run that ended: a failed one leaves the next trial to make it
            self._reference = list(result.losses)
        numerics = self._numerics_gate(config, result.losses, result.skipped)
        peak_gb = result.peak_bytes / 1e9 if result.peak_bytes is not None else None
        # the CPU's resident set holds the process's own footprint and the allocator's
        # caches: no measure of the step's tensors to correct the memory model by
        measured_gb = peak_gb if result.peak_is_tensors else None
        predicted = self.predict_memory(self.problem, config) or 0.0
        tokens_per_step = self.global_batch * cfg.seq_len
        tokens_per_s = tokens_per_step * self.steps / result.timed_s
        model_flops = flops_per_token(cfg) * tokens_per_s
        # MFU over the dense bf16 peak of all the devices used, whatever the precision ran
        cuda = self.device.type == "cuda"
        peak = bf16_peak_flops(self.device_name) if cuda else None
        peak = peak * self.world_size if peak else None
        values = {"tokens_per_s": tokens_per_s}
        if peak_gb is not None:  # absent where the CPU's peak RSS cannot be reset and read
            values["peak_memory_gb"] = peak_gb
        return Measurement(
            values=values,
            metrics={
                "step_ms": result.timed_s / self.steps * 1e3,
                "warmup_s": result.warmup_s,  # includes torch.compile's compilation
                "compile_s": result.compile_s,  # the warm-up's time beyond steady steps
                "tokens_per_s_per_device": tokens_per_s / self.world_size,
                "world_size": self.world_size,
                "mfu": model_flops / peak if peak else None,
                "mfu_peak_tflops": peak / 1e12 if peak else None,
                "mfu_note": "" if peak else f"no dense bf16 peak known for {self.device_name}",
                "model_tflops": model_flops / 1e12,
                "first_loss": result.losses[0],
                "final_loss": result.losses[-1],
                "params_m": param_count(cfg) / 1e6,
                "accumulation": result.accumulation,
                "tokens_per_step": tokens_per_step,
                "skipped_steps": result.skipped,
                "local_params_m": result.extra["local_params"] / 1e6,
                "predicted_memory_gb": predicted / 1e9,
                "measured_memory_gb": measured_gb,
                **numerics,
            },
            telemetry=read_telemetry(self.device.index or 0),
        )

    def _is_default(self, tc: TrainConfig) -> bool:
        """Whether ``tc`` trains as the untuned default does (False where the default cannot
        run this problem: a global batch that does not share out over the processes)."""
        try:
            return tc == self.parse_config(self.default_config())
        except Infeasible:
            return False

    def reference_losses(self) -> list[float]:
        """The loss after every step of the untuned default config on this model and data
        (run once per process, or taken from the default's own trial where that came first):
        what every config's trajectory is checked against."""
        if self._reference is None:
            self._reference = []
            self._reference_running = True
            try:
                self.evaluate(
                    self.default_config(), lambda step, loss: self._reference.append(loss)
                )
            finally:
                self._reference_running = False
        return self._reference

    def _numerics_gate(
        self, config: dict[str, Any], losses: list[float], skipped: int
    ) -> dict[str, Any]:
        """Check that ``losses`` fell as the reference's did (see :data:`NUMERICS_TOLERANCE`).

        Raises:
            WrongResult: the loss fell by more than 25% less (or more) than the reference's.
        """
        if self._reference_running or not self.check_numerics:
            return {}
        ref = self._reference or []
        if len(ref) != len(losses):
            return {"numerics": f"unchecked: {self._reference_error or 'no reference run'}"}
        ref_descent = ref[0] - ref[-1]
        descent = losses[0] - losses[-1]
        if ref_descent <= 0:  # a reference that did not learn cannot judge anything
            return {"numerics": "unchecked: the reference run's loss did not fall"}
        gap = abs(descent - ref_descent) / ref_descent
        if gap > NUMERICS_TOLERANCE:
            raise WrongResult(
                f"does not train the same model: its loss fell by {descent:.4g} over "
                f"{len(losses)} steps, the reference's by {ref_descent:.4g} ({gap:.0%} apart, "
                f"limit {NUMERICS_TOLERANCE:.0%}); {skipped} optimizer steps skipped"
            )
        return {"numerics_gap": gap, "reference_final_loss": ref[-1]}

    def close(self) -> None:
        """Free cached memory and compiled code before the worker exits."""
        release(self.device, dynamo=True)


OBJECTIVE = TrainStepObjective
