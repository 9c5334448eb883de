"""A train-step trial over ``world_size`` processes of one node: one spawned process per GPU
(NCCL), or per share of the CPU's cores (gloo), each running :func:`~autotune.objectives.
train_loop.run_steps` in its rank of a parallel layout (:mod:`autotune.objectives.
train_layouts`). Rank 0's timings and losses come back; the peak memory is the largest rank's.
A rank that fails ends the others; its failure is raised again here as the same kind
(divergence, infeasible, out of memory) so the trial is recorded with the right state.

Example (two gloo processes on the CPU; a few seconds):
    >>> from autotune.kernels.llama import LlamaConfig
    >>> from autotune.objectives.train_loop import TrainConfig, TrainJob
    >>> job = TrainJob(LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=16),
    ...                global_batch=4, lr=1e-3, seed=0, steps=2, warmup_steps=1,
    ...                config=TrainConfig(micro_batch=2, precision="fp32", layout="ddp"))
    >>> result = launch(job, world_size=2, device_type="cpu")  # doctest: +SKIP
    >>> result.accumulation  # doctest: +SKIP
    1
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from autotune.failures import Diverged, Infeasible, WrongResult
from autotune.objectives.train_loop import LoopResult, Placement, TrainJob, run_steps

# Seconds the other ranks get to end on their own after one has failed.
_GRACE_S = 5.0
_KINDS: dict[str, type[BaseException]] = {
    "Diverged": Diverged,
    "Infeasible": Infeasible,
    "WrongResult": WrongResult,
    "OutOfMemoryError": torch.cuda.OutOfMemoryError,
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write(path: Path, message: tuple[Any, ...]) -> None:
    partial = path.with_suffix(".partial")
    partial.write_bytes(pickle.dumps(message))
    partial.replace(path)  # whole or absent: the launcher never reads half a message


def rank_main(rank: int, world_size: int, device_type: str, port: int, folder: Path) -> None:
    """One rank: join the process group, train the job in ``folder/job.pkl``, write
    ("ok", result) or ("error", kind, message) to ``folder/rank<N>.pkl``."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    out = folder / f"rank{rank}.pkl"
    try:
        job: TrainJob = pickle.loads((folder / "job.pkl").read_bytes())
        if device_type == "cuda":
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        else:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
            device = torch.device("cpu")
        dist.init_process_group(
            "nccl" if device_type == "cuda" else "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
        )
        mesh = init_device_mesh(device_type, (world_size,))
        _write(out, ("ok", run_steps(job, Placement(device, rank, world_size, mesh))))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the trial
        _write(out, ("error", type(exc).__name__, (str(exc).splitlines() or [""])[0][:500]))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def launch(
    job: TrainJob, world_size: int, device_type: str, timeout_s: float | None = None
) -> LoopResult:
    """Run ``job`` on ``world_size`` processes; rank 0's result with the largest peak.

    The ranks are plain child processes (``python -m autotune.objectives.train_parallel``),
    so a trial's worker may start them, and in its process group, so a worker that is ended
    ends them too.

    Raises:
        Infeasible: more processes than the node has GPUs.
        Diverged, Infeasible, WrongResult, torch.cuda.OutOfMemoryError: what a rank raised.
        RuntimeError: a rank that failed otherwise or died without a word (e.g. a segfault).
    """
    if device_type == "cuda" and torch.cuda.device_count() < world_size:
        raise Infeasible(
            f"world_size={world_size} needs {world_size} GPUs; {torch.cuda.device_count()} seen"
        )
    with tempfile.TemporaryDirectory(prefix="autotune-ranks-") as tmp:
        folder = Path(tmp)
        (folder / "job.pkl").write_bytes(pickle.dumps(job))
        port = free_port()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    __name__,
                    str(r),
                    str(world_size),
                    device_type,
                    str(port),
                    str(folder),
                ]  # fmt: skip
            )
            for r in range(world_size)
        ]
        done, failure = _collect(procs, folder, timeout_s)
    if failure is not None:
        rank, kind, message = failure
        raise _KINDS.get(kind, RuntimeError)(f"rank {rank} of {world_size}: {kind}: {message}")
    result = done[0]
    peaks = [r.peak_bytes for r in done.values() if r.peak_bytes is not None]
    result.peak_bytes = max(peaks) if peaks else None
    result.extra["peak_bytes_by_rank"] = [done[r].peak_bytes for r in sorted(done)]
    result.extra["local_params_by_rank"] = [done[r].extra["local_params"] for r in sorted(done)]
    return result


def _collect(
    procs: list[subprocess.Popen], folder: Path, timeout_s: float | None
) -> tuple[dict[int, LoopResult], tuple[int, str, str] | None]:
    """Wait for every rank's message; on the first failure, end the others."""
    done: dict[int, LoopResult] = {}
    failure: tuple[int, str, str] | None = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while len(done) < len(procs) and failure is None:
            for rank, proc in enumerate(procs):
                path = folder / f"rank{rank}.pkl"
                if rank in done or not path.exists():
                    if rank not in done and proc.poll() not in (None, 0):
                        failure = (rank, "RuntimeError", f"exited with code {proc.returncode}")
                    continue
                message = pickle.loads(path.read_bytes())
                if message[0] == "ok":
                    done[rank] = message[1]
                else:
                    failure = (rank, message[1], message[2])
                    break
            if deadline is not None and time.monotonic() > deadline:
                failure = failure or (0, "TimeoutError", f"no result within {timeout_s:g} s")
            time.sleep(0.05)
    finally:
        grace = time.monotonic() + (_GRACE_S if failure else 60.0)
        for proc in procs:
            try:
                proc.wait(max(0.0, grace - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if failure is not None and failure[1] not in _KINDS:
        # the first word may be a rank's lost connection to one that failed for a reason
        for rank in range(len(procs)):
            path = folder / f"rank{rank}.pkl"
            message = pickle.loads(path.read_bytes()) if path.exists() else ("ok",)
            if message[0] == "error" and message[1] in _KINDS:
                return done, (rank, message[1], message[2])
    return done, failure


if __name__ == "__main__":
    rank_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
