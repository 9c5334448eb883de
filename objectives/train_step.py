"""Training-step objective: tokens per second and peak memory of a Llama-style training loop.

Each trial builds a fresh :class:`~autotune.kernels.llama.Llama` with random weights and AdamW,
runs ``warmup_steps`` untimed then ``steps`` timed optimizer steps on one fixed random batch
(so the loss falls as the model memorises it), and frees everything afterwards. The global
batch is fixed by the problem; the config only changes how it is computed:

    accumulation = global_batch // micro_batch
    tokens per optimizer step = micro_batch * seq_len * accumulation = global_batch * seq_len

Each config's loss trajectory must match the untuned default's on the same model, data and
steps (one reference run per process): a config whose loss falls by more than
:data:`NUMERICS_TOLERANCE` less (or more) than the reference's is ``wrong_result``, with the
optimizer steps its loss scaler skipped counted (``skipped_steps``); NaN/inf and blow-ups
still prune at once. ``--problem check_numerics=false`` turns the gate off, ``model=760m``
takes a preset size (:data:`MODEL_PRESETS`). MFU is over the device's dense bf16 peak.

Tunables (``config``): ``micro_batch``, ``precision`` (fp32 | tf32 | bf16 | fp16),
``activation_checkpointing``, ``attention_backend`` (default | math | flash | efficient | cudnn),
``optimizer`` (fused | foreach AdamW), ``compile``, and ``loss_scale_init`` (fp16's first
dynamic loss scale, 2^16 when absent; ignored by the other precisions). Keys left out take
:meth:`TrainStepObjective.default_config`'s values.

Example:
    >>> obj = TrainStepObjective({"vocab": 64, "d_model": 32, "n_layers": 1, "n_heads": 2,
    ...     "seq_len": 16, "global_batch": 4, "steps": 2, "warmup_steps": 1, "device": "cpu"})
    >>> m = obj.evaluate({"micro_batch": 2})
    >>> m.values["tokens_per_s"] > 0, m.metrics["accumulation"]
    (True, 2)
    >>> obj.close()
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.device import detect_device, read_telemetry
from autotune.device_peaks import bf16_peak_flops
from autotune.failures import Diverged, Infeasible, WrongResult
from autotune.kernels.llama import Llama, LlamaConfig, flops_per_token, lm_loss, param_count
from autotune.measurement import Measurement
from autotune.objectives import train_memory
from autotune.objectives.base import Objective, Reporter, no_reporting

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
#: "default" is torch's own dispatch (what an untuned run gets); the others force one backend.
ATTENTION_BACKENDS: dict[str, SDPBackend | None] = {
    "default": None,
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
OPTIMIZERS = ("fused", "foreach")
#: Every key a config may hold; all but loss_scale_init are in the default config.
CONFIG_KEYS = (
    "micro_batch",
    "precision",
    "activation_checkpointing",
    "attention_backend",
    "optimizer",
    "compile",
    "loss_scale_init",
)


# A loss this many times above ln(vocab) (the loss of a uniform guess) only comes from a run
# that has blown up: it means the target gets probability e^-(10 ln V) = V^-10.
_BLOWUP_FACTOR = 10.0

# The numerics gate: a config trains the same model when its loss falls by the reference run's
# descent D (first loss - last loss, same model, data and steps, the untuned default config)
# within this share of D. Configs that train the same model land within a few percent of D
# (bf16 against fp32 on the CPU's default problem: 0.02% of D); each skipped optimizer step
# costs about D / steps, so 25% admits the first steps fp16's dynamic loss scaler skips (2 of
# 13) and fails a run that skips a quarter of its steps or trains something else.
NUMERICS_TOLERANCE = 0.25

# Problem keys with a default; the model sizes and global_batch have none.
_PROBLEM_DEFAULTS: dict[str, Any] = {"lr": 3e-4, "steps": 10, "warmup_steps": 3, "seed": 0}

#: ``--problem model=NAME``: Llama-style shapes (a 32000-token vocabulary, embedding and head
#: untied, SwiGLU); the parameters each one has, counted by ``param_count``: 125m 134M,
#: 350m 369M, 760m 778M, 1.3b 1.35B, 7b 6.7B.
MODEL_PRESETS: dict[str, dict[str, int]] = {
    "125m": {"vocab": 32000, "d_model": 768, "n_layers": 12, "n_heads": 12},
    "350m": {"vocab": 32000, "d_model": 1024, "n_layers": 24, "n_heads": 16},
    "760m": {"vocab": 32000, "d_model": 1536, "n_layers": 24, "n_heads": 16},
    "1.3b": {"vocab": 32000, "d_model": 2048, "n_layers": 24, "n_heads": 16},
    "7b": {"vocab": 32000, "d_model": 4096, "n_layers": 32, "n_heads": 32},
}
_PROBLEM_REQUIRED = ("vocab", "d_model", "n_layers", "n_heads", "seq_len", "global_batch")


@dataclass(frozen=True)
class TrainConfig:
    """One trial's tunables, checked."""

    micro_batch: int
    precision: str
    activation_checkpointing: bool
    attention_backend: str
    optimizer: str
    compile: bool
    loss_scale_init: float = 2.0**16  # GradScaler's first loss scale; used with fp16 only


def _reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (VmHWM); False where Linux refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes() -> int | None:
    """This process's peak resident set size since the last reset, in bytes."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        pass
    return None


class TrainStepObjective(Objective):
    """Throughput and peak memory of full training steps (forward, backward, AdamW)."""

    name: ClassVar[str] = "train-step"
    space: ClassVar[str] = "train_step.yaml"
    directions: ClassVar[dict[str, str]] = {
        "tokens_per_s": "maximize",
        "peak_memory_gb": "minimize",
    }

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
        self.steps = int(p["steps"])
        self.warmup_steps = int(p["warmup_steps"])
        if self.global_batch <= 0 or self.steps <= 0 or self.warmup_steps < 0:
            raise ValueError("need global_batch > 0, steps > 0 and warmup_steps >= 0")

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
                "seed": 0, "check_numerics": True,
            }  # fmt: skip
        # 8 sequences x 64 tokens = 512 tokens per optimizer step
        return {
            "model": "", "vocab": 512, "d_model": 128, "n_layers": 2, "n_heads": 4,
            "seq_len": 64, "global_batch": 8, "lr": 1e-3, "steps": 10, "warmup_steps": 3,
            "seed": 0, "check_numerics": True,
        }  # fmt: skip

    def default_config(self) -> dict[str, Any]:
        """What a practitioner runs untuned: bf16 autocast where the device has it (a CUDA GPU
        with bf16; fp32 on a CPU, where autocast only slows a step), PyTorch's default SDPA
        dispatch, fused AdamW, no checkpointing, no compile, and the largest micro-batch up to
        8 that divides the global batch.

        Example:
            >>> TrainStepObjective({"vocab": 64, "d_model": 32, "n_layers": 1, "n_heads": 2,
            ...     "seq_len": 16, "global_batch": 12, "device": "cpu"}).default_config()
            ... # doctest: +NORMALIZE_WHITESPACE
            {'micro_batch': 6, 'precision': 'fp32', 'activation_checkpointing': False,
             'attention_backend': 'default', 'optimizer': 'fused', 'compile': False}
        """
        bf16 = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
        return {
            "micro_batch": max(d for d in range(1, 9) if self.global_batch % d == 0),
            "precision": "bf16" if bf16 else "fp32",
            "activation_checkpointing": False,
            "attention_backend": "default",
            "optimizer": "fused",
            "compile": False,
        }

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

    def parse_config(self, config: dict[str, Any]) -> TrainConfig:
        """Fill ``config`` from the defaults and check it.

        Raises:
            Infeasible: unknown keys, values outside their choices, or a micro_batch that does
                not divide global_batch.
        """
        merged = {**self.default_config(), **config}
        unknown = sorted(set(merged) - set(CONFIG_KEYS))
        if unknown:
            raise Infeasible(f"unknown train-step config keys: {', '.join(unknown)}")
        micro_batch = int(merged["micro_batch"])
        if micro_batch <= 0 or self.global_batch % micro_batch:
            raise Infeasible(
                f"micro_batch={micro_batch} does not divide global_batch={self.global_batch}"
            )
        choices = {
            "precision": PRECISIONS,
            "attention_backend": tuple(ATTENTION_BACKENDS),
            "optimizer": OPTIMIZERS,
        }
        for key, allowed in choices.items():
            if merged[key] not in allowed:
                raise Infeasible(f"{key}={merged[key]!r} is not one of {', '.join(allowed)}")
        if (
            merged["precision"] == "bf16"
            and self.device.type == "cuda"
            and not torch.cuda.is_bf16_supported()
        ):
            raise Infeasible(f"bf16 is not supported on {self.device_name}")
        loss_scale_init = float(merged.get("loss_scale_init", TrainConfig.loss_scale_init))
        if not loss_scale_init > 0:
            raise Infeasible(f"loss_scale_init={loss_scale_init} must be positive")
        return TrainConfig(
            micro_batch=micro_batch,
            precision=merged["precision"],
            activation_checkpointing=bool(merged["activation_checkpointing"]),
            attention_backend=merged["attention_backend"],
            optimizer=merged["optimizer"],
            compile=bool(merged["compile"]),
            loss_scale_init=loss_scale_init,
        )

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _make_optimizer(self, model: torch.nn.Module, kind: str) -> torch.optim.Optimizer:
        lr = float(self.problem["lr"])
        params = list(model.parameters())
        try:
            return torch.optim.AdamW(
                params,
                lr=lr,
                betas=(0.9, 0.95),
                weight_decay=0.1,
                fused=kind == "fused",
                foreach=kind == "foreach",
            )
        except RuntimeError as exc:  # fused AdamW refuses devices it has no kernel for
            raise Infeasible(f"{kind} AdamW is unavailable on {self.device.type}: {exc}") from exc

    def _batches(self, micro_batch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The fixed random global batch, cut into (inputs, targets) micro-batches."""
        cfg = self.model_config
        gen = torch.Generator().manual_seed(int(self.problem["seed"]) + 1)
        tokens = torch.randint(0, cfg.vocab, (self.global_batch, cfg.seq_len + 1), generator=gen)
        tokens = tokens.to(self.device)
        return [
            (chunk[:, :-1], chunk[:, 1:]) for chunk in tokens.split(micro_batch)
        ]  # global_batch / micro_batch chunks of (micro_batch, seq_len)

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        """Build the model, train ``warmup_steps + steps`` steps, measure the timed ones.

        ``report(step, loss)`` is called after every optimizer step, warm-up included, with
        ``step`` counted from 0 over all of them; the time it takes is not measured.

        Raises:
            Infeasible: see :meth:`parse_config`; fused AdamW on a device without its kernel.
            Diverged: the loss is NaN/inf or above 10 * ln(vocab), or ``report`` said to stop.
            torch.cuda.OutOfMemoryError: on CUDA, left for the worker to classify.
            RuntimeError: e.g. an attention backend that cannot run these inputs.
        """
        tc = self.parse_config(config)
        if self.check_numerics and not self._reference_running and self._reference is None:
            try:  # before this trial's model exists: the two never share the device's memory
                self.reference_losses()
            except Exception as exc:  # noqa: BLE001 - the trial runs on, its numerics unchecked
                self._reference = []
                self._reference_error = f"the reference run failed: {type(exc).__name__}"
        cfg = self.model_config
        cuda = self.device.type == "cuda"
        accum = self.global_batch // tc.micro_batch
        tokens_per_step = tc.micro_batch * cfg.seq_len * accum  # = global_batch * seq_len
        saved_matmul_precision = torch.get_float32_matmul_precision()
        model = compiled = optimizer = batches = step = None
        try:
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(self.device)
            rss_reset = cuda or _reset_peak_rss()

            # tf32 only changes how fp32 matmuls run on CUDA; on the CPU it is plain fp32
            torch.set_float32_matmul_precision("high" if tc.precision == "tf32" else "highest")
            torch.manual_seed(int(self.problem["seed"]))
            with torch.device(self.device):
                model = Llama(cfg, activation_checkpointing=tc.activation_checkpointing)
            optimizer = self._make_optimizer(model, tc.optimizer)
            compiled = torch.compile(model) if tc.compile else model
            batches = self._batches(tc.micro_batch)
            step = self._step_fn(compiled, optimizer, batches, tc)

            limit = _BLOWUP_FACTOR * math.log(cfg.vocab)
            losses: list[float] = []
            skipped = 0
            timed_s = warmup_s = 0.0
            for index in range(self.warmup_steps + self.steps):
                self._sync()
                start = time.perf_counter()
                loss, was_skipped = step()  # .item() inside waits for the step's work to finish
                skipped += was_skipped
                self._sync()
                elapsed = time.perf_counter() - start
                if index < self.warmup_steps:
                    warmup_s += elapsed
                else:
                    timed_s += elapsed
                losses.append(loss)
                if not math.isfinite(loss) or loss > limit:
                    raise Diverged(f"loss {loss:.4g} at step {index} (limit {limit:.3g})")
                report(index, loss)

            numerics = self._numerics_gate(config, losses, skipped)
            if cuda:
                peak_gb: float | None = torch.cuda.max_memory_allocated(self.device) / 1e9
                measured_gb = peak_gb  # what the memory model predicts: tensors allocated
            else:
                rss = _peak_rss_bytes() if rss_reset else None
                peak_gb = rss / 1e9 if rss is not None else None
                # the resident set holds the process's own footprint and the allocator's
                # caches: no measure of the step's tensors to correct the memory model by
                measured_gb = None
            predicted = self.predict_memory(self.problem, config) or 0.0
            tokens_per_s = tokens_per_step * self.steps / timed_s
            model_flops = flops_per_token(cfg) * tokens_per_s
            # MFU over the device's dense bf16 peak, whatever the precision ran
            peak = bf16_peak_flops(self.device_name) if cuda else None
            values = {"tokens_per_s": tokens_per_s}
            if peak_gb is not None:  # absent where the CPU's peak RSS cannot be reset and read
                values["peak_memory_gb"] = peak_gb
            return Measurement(
                values=values,
                metrics={
                    "step_ms": timed_s / self.steps * 1e3,
                    "warmup_s": warmup_s,  # includes torch.compile's compilation
                    "mfu": model_flops / peak if peak else None,
                    "mfu_peak_tflops": peak / 1e12 if peak else None,
                    "mfu_note": "" if peak else f"no dense bf16 peak known for {self.device_name}",
                    "model_tflops": model_flops / 1e12,
                    "first_loss": losses[0],
                    "final_loss": losses[-1],
                    "params_m": param_count(cfg) / 1e6,
                    "accumulation": accum,
                    "tokens_per_step": tokens_per_step,
                    "skipped_steps": skipped,
                    "predicted_memory_gb": predicted / 1e9,
                    "measured_memory_gb": measured_gb,
                    **numerics,
                },
                telemetry=read_telemetry(self.device.index or 0),
            )
        except BaseException as exc:
            # The traceback keeps every frame's locals (activations, logits) alive for as long as
            # the worker holds the exception; drop them so that an OOM really frees the memory.
            traceback.clear_frames(exc.__traceback__)
            raise
        finally:
            torch.set_float32_matmul_precision(saved_matmul_precision)
            del model, compiled, optimizer, batches, step
            self._release(dynamo=tc.compile)

    def reference_losses(self) -> list[float]:
        """The loss after every step of the untuned default config on this model and data
        (run once per process): what every config's trajectory is checked against."""
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

    def _step_fn(
        self,
        model: Callable[[torch.Tensor], torch.Tensor],
        optimizer: torch.optim.Optimizer,
        batches: list[tuple[torch.Tensor, torch.Tensor]],
        tc: TrainConfig,
    ) -> Callable[[], tuple[float, bool]]:
        """One optimizer step over all micro-batches; returns the global batch's mean loss and
        whether the loss scaler skipped the step (fp16 gradients that overflowed)."""
        accum = len(batches)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(tc.precision)
        # fp16 needs dynamic loss scaling: small gradients would underflow to zero otherwise
        scaler = torch.amp.GradScaler(
            self.device.type, init_scale=tc.loss_scale_init, enabled=tc.precision == "fp16"
        )
        first = optimizer.param_groups[0]["params"][0]

        def steps_taken() -> float:
            # AdamW counts the updates it made in each parameter's state
            return float(optimizer.state.get(first, {}).get("step", 0))

        backend = ATTENTION_BACKENDS[tc.attention_backend]
        # torch's own dispatch for "default", else the one backend, backward included
        attention = (
            (lambda: sdpa_kernel(backend)) if backend is not None else contextlib.nullcontext
        )
        device_type = self.device.type

        def step() -> float:
            optimizer.zero_grad(set_to_none=True)
            total = torch.zeros((), device=self.device)
            # the backward pass (and checkpointing's recompute) runs inside sdpa_kernel too
            with attention():
                for inputs, targets in batches:
                    autocast = (
                        torch.autocast(device_type, dtype=dtype)
                        if dtype is not None
                        else contextlib.nullcontext()
                    )
                    with autocast:
                        # each micro-batch's mean loss / accum: the gradients sum to the mean
                        loss = lm_loss(model(inputs), targets) / accum
                    scaler.scale(loss).backward()
                    total += loss.detach()
            before = steps_taken()
            scaler.step(optimizer)  # skips the update when fp16 gradients overflowed
            scaler.update()
            return total.item(), steps_taken() == before

        return step

    def _release(self, dynamo: bool = False) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        if dynamo:
            # Compiled code is cached per code object (Block.forward is shared by every model
            # built in this process): without a reset, later trials hit the recompile limit and
            # silently run eagerly.
            torch._dynamo.reset()

    def close(self) -> None:
        """Free cached memory and compiled code before the worker exits."""
        self._release(dynamo=True)


OBJECTIVE = TrainStepObjective
