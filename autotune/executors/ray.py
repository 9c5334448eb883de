"""Run trials as Ray actors, on an existing Ray cluster or on a local one started on demand.

Each slot is an actor that holds the GPUs a trial needs (``gpus_per_trial``), builds the
workload's objective once and evaluates configs on request; the driver's sampler, constraints
and storage stay in the driver's process, so results land in the same Optuna storage as a
local sweep. An actor that dies (a segfault, its node lost) turns its trial into ``crashed``
with Ray's reason, and the slot gets a new actor; a trial past its timeout is ended by killing
its actor. A trial's clock starts once its actor is built (a new actor's start, which imports
the workload's libraries, has its own limit, as a local worker's does). The capacity follows
the cluster: a node lost takes its slots with it. The whole cluster stopped (its GCS refuses
connections; Ray would end the driver's process a minute later) ends the sweep at once with
:class:`~autotune.executors.base.ClusterLost`, its running trials told ``interrupted``.

Divergence is judged inside the actor by the same rule as the driver's pruner (Optuna's
report/should_prune need the driver's study, which actors do not reach).

Ray is an optional extra: ``pip install 'autotune[ray]'``.

Example (a local Ray of 2 CPUs, started and stopped by the executor):
    >>> with RayExecutor("faults", {}, workers=2, num_cpus=2) as executor:  # doctest: +SKIP
    ...     executor.submit(0, {"fault": "none", "score": 3.0})
    ...     executor.wait_any()[0].result.measurement.values["score"]
    3.0
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.executors.base import ClusterLost, Executor, ExecutorError, Finished
from autotune.failures import TrialStatus, first_line
from autotune.runners.base import PruneCheck, TrialResult, never_prune

INSTALL_HINT = "pip install 'autotune[ray]'"
_POLL_S = 0.5
_RESOURCES_TTL_S = 2.0
#: How often a wait with nothing finished asks whether the cluster's GCS still takes a connection
_LIVENESS_EVERY_S = 5.0
#: How long a question to the GCS (the cluster's resources) goes unanswered before the executor
#: checks that the GCS still takes a connection, and again each time as long after that
_GCS_PATIENCE_S = 2.0

PruneRule = Callable[[Sequence[float]], bool]


@dataclass
class _Flight:
    """A trial in flight: its slot and ticket, when it was submitted, and when its actor was
    ready (``ready_ref`` resolves when a new actor's constructor has run)."""

    slot: int
    ticket: int
    submitted: float
    ready_ref: Any = None
    started: float | None = None

    def clock(self, now: float, timeout_s: float, start_timeout_s: float) -> str | None:
        """Why the trial is out of time at ``now``, or None."""
        if self.started is None:
            if now - self.submitted > start_timeout_s:
                return f"Ray actor did not start within {start_timeout_s:.0f} s; killed"
            return None
        if now - self.started > timeout_s:
            return f"no result after {timeout_s:.1f} s; Ray actor killed"
        return None


def import_ray() -> Any:
    """The ``ray`` module, or :class:`ExecutorError` naming the install command.

    What trials print reaches the driver's stderr (``log_to_driver``), each line prefixed with
    its actor, as Ray streams it: every line (Ray's dedup would fold a sweep's trials, which
    print alike, into "[repeated 2x]"), and without colour codes where stderr is no terminal.
    A user's own ``RAY_DEDUP_LOGS`` / ``RAY_COLOR_PREFIX`` stand."""
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # read when ray is first imported
    if not sys.stderr.isatty():
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    try:
        import ray
    except ImportError:
        raise ExecutorError(f"--executor ray needs Ray: {INSTALL_HINT}") from None
    return ray


def ensure_ray(address: str | None, num_cpus: int | None = None) -> bool:
    """Connect to Ray at ``address`` (``auto``, ``HOST:PORT``), or start a local one when
    ``address`` is None; True when this call started it (the caller shuts it down)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    options: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": True,
    }
    if address is None:
        options["num_cpus"] = num_cpus
    else:
        check_reachable(address, handshake=True)
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = first_line(exc)
        raise ExecutorError(f"--address {address}: cannot reach a Ray cluster: {first}") from None
    except BaseException as exc:  # Ctrl-C while it starts: the processes it started end with it
        with contextlib.suppress(Exception):
            ray.shutdown()
        if isinstance(exc, KeyboardInterrupt):
            atexit.register(_end_without_finalizing)
        raise
    return True


def _end_without_finalizing() -> None:
    """End the process at once with Ctrl-C's exit code (130), its output flushed, when its
    Ray start was interrupted: the core worker Ray 2.60 leaves half-started then crashes the
    interpreter's finalization (a segfault, exit 139, in about 1 of 12 interrupts a few
    seconds into ``ray.init``; none in 14 with this). Registered last, it runs first of the
    exit handlers; the storage has committed every trial by then."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(130)


#: Seconds a local Ray started for a command takes to shut down (1.34 s measured on a 2-core
#: machine), held back from the command's time budget so that the shutdown ends within it
LOCAL_SHUTDOWN_S = 1.5


@contextlib.contextmanager
def command_session(address: str | None) -> Iterator[float]:
    """Ray for the whole of one command: started (or connected to) once, for the sweep and
    its finish, whose executors then find it running and leave it so; shut down at the end
    if this call started it. Yields the seconds its shutdown is expected to take (0 where it
    was running already or is a cluster's, which a driver leaves at once).

    Each executor starting its own local Ray cost the finish a start and a shutdown (2.4 s and
    1.3 s on 2 cores) inside the time budget, and the last shutdown ran past it.

    Example:
        >>> with command_session(None) as shutdown_s:  # doctest: +SKIP
        ...     run_sweep_and_finish()  # every RayExecutor here shares the local Ray
    """
    started = ensure_ray(address)
    try:
        yield LOCAL_SHUTDOWN_S if started and address is None else 0.0
    finally:
        if started:
            with contextlib.suppress(Exception):  # a lost cluster: nothing to stop
                import_ray().shutdown()


#: An HTTP/2 client's connection preface and an empty SETTINGS frame: a gRPC server (Ray's
#: GCS) answers with a SETTINGS frame of its own (frame type 4, the frame header's 4th byte)
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def check_reachable(address: str, timeout_s: float = 5.0, *, handshake: bool = False) -> None:
    """A ``HOST:PORT`` address answers a TCP connection within ``timeout_s`` (Ray's own client
    retries an unreachable one for minutes); other forms (``auto``, ``ray://``) are Ray's.
    With ``handshake``, it must also answer as a gRPC server (HTTP/2), as a GCS does at once:
    any other service there (the dashboard's port, 8265) Ray retries for minutes too. Not over
    TLS (``RAY_USE_TLS``), whose handshake comes first.

    Raises:
        ExecutorError: naming the address and why it cannot be reached.

    Example:
        >>> try:
        ...     check_reachable("127.0.0.1:1", timeout_s=1.0)
        ... except ExecutorError as exc:
        ...     print(str(exc).split(": ")[0])
        --address 127.0.0.1:1
    """
    host, _, port = address.rpartition(":")
    if not host or "/" in address or not port.isdigit():
        return
    unable = f"--address {address}: cannot reach a Ray cluster"
    handshake = handshake and os.environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as sock:
            if not handshake:
                return
            sock.sendall(_HTTP2_PREFACE)
            answer = b""
            while len(answer) < 9:
                chunk = sock.recv(9 - len(answer))
                if not chunk:
                    break
                answer += chunk
    except TimeoutError:
        raise ExecutorError(f"{unable}: no answer within {timeout_s:g} s") from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ExecutorError(f"{unable}: {why}") from None
    if answer[3:4] != b"\x04":  # not a SETTINGS frame: no gRPC server
        raise ExecutorError(f"{unable}: it answers, but not as a Ray GCS (gRPC); give the GCS's "
                            "port (6379 unless `ray start --port` set another), not the "
                            "dashboard's")  # fmt: skip


def _gcs_address(ray: Any) -> str | None:
    """The HOST:PORT of the connected cluster's GCS, or None where Ray does not say."""
    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:  # noqa: BLE001 - an older or client-mode Ray: not watched
        return None
    return address if isinstance(address, str) and ":" in address else None


_EXIT = re.compile(r"Worker exit type: (?P<type>\S+) Worker exit detail: (?P<detail>.*?)"
                   r"(?= Some common causes|$)", re.DOTALL)  # fmt: skip


def _lost_reason(exc: BaseException) -> str:
    """A trial's reason when its actor died: Ray's first line, how its worker process ended
    (Ray's exit type and detail) and, for a process that just vanished, what does that.

    Example:
        >>> class ActorDiedError(Exception): ...
        >>> reason = _lost_reason(ActorDiedError("The actor died.\\n\\tpid: 7\\nIt is dead. Worker "
        ...     "exit type: SYSTEM_ERROR Worker exit detail: code 2. Some common causes ..."))
        >>> print(reason.replace(" Its ", "\\n").replace(" (", "\\n("))
        Ray worker lost: ActorDiedError: The actor died.
        worker process ended: SYSTEM_ERROR, code 2
        (killed, e.g. by the OOM killer, or crashed, e.g. SIGSEGV)
    """
    lines = str(exc).strip().splitlines()
    reason = f"Ray worker lost: {type(exc).__name__}: {lines[0] if lines else ''}"
    ended = _EXIT.search(str(exc))
    if ended is not None:
        detail = " ".join(ended["detail"].split()).rstrip(".")
        reason += f" Its worker process ended: {ended['type']}, {detail}"
        if ended["type"] == "SYSTEM_ERROR":
            reason += " (killed, e.g. by the OOM killer, or crashed, e.g. SIGSEGV)"
    return reason[:400]


class _TrialActor:
    """One slot: builds the objective once, evaluates configs one at a time."""

    def __init__(self, workload: str, problem: dict[str, Any], prune_rule: PruneRule | None):
        from autotune.runners.inprocess import InProcessRunner

        self.runner = InProcessRunner(workload, problem)
        self.prune_rule = prune_rule

    def evaluate(self, config: dict[str, Any]) -> tuple[TrialResult, str]:
        import ray

        history: list[float] = []

        def should_prune(step: int, value: float) -> bool:
            history.append(value)
            return self.prune_rule(history) if self.prune_rule is not None else False

        result = self.runner.evaluate(config, should_prune)
        return result, ray.util.get_node_ip_address()


class RayExecutor(Executor):
    """Trials as Ray actors; see the module docstring.

    Args:
        address: ``auto``, ``HOST:PORT``, or None to start a local Ray.
        gpus_per_trial, cpus_per_trial: resources each actor holds.
        workers: slots; default as many as the cluster's resources allow.
        timeout_s: wall-time limit of one trial, from the moment its actor is ready.
        start_timeout_s: limit for a new actor to start and build the objective.
        prune_rule: the divergence rule applied to reported values inside the actor.
        num_cpus: CPUs of a local Ray started here (default: the machine's).
    """

    name = "ray"

    def __init__(
        self,
        workload: str,
        problem: dict[str, Any],
        *,
        address: str | None = None,
        gpus_per_trial: float = 0.0,
        cpus_per_trial: float = 1.0,
        workers: int | None = None,
        timeout_s: float = 300.0,
        start_timeout_s: float = 180.0,
        prune_rule: PruneRule | None = None,
        num_cpus: int | None = None,
    ) -> None:
        self._ray = import_ray()
        self._started = ensure_ray(address, num_cpus)
        try:
            self._set_up(workload, problem, gpus_per_trial, cpus_per_trial, workers, timeout_s,
                         start_timeout_s, prune_rule)  # fmt: skip
        except BaseException:  # Ctrl-C, or no room: a Ray started here is shut down
            self.close()
            raise

    def _set_up(
        self, workload: str, problem: dict[str, Any], gpus_per_trial: float,
        cpus_per_trial: float, workers: int | None, timeout_s: float, start_timeout_s: float,
        prune_rule: PruneRule | None,
    ) -> None:  # fmt: skip
        self.workload, self.problem = workload, dict(problem)
        self.gpus_per_trial, self.cpus_per_trial = gpus_per_trial, cpus_per_trial
        self.timeout_s, self.start_timeout_s = timeout_s, start_timeout_s
        self.prune_rule = prune_rule
        self._resources: tuple[float, dict[str, float]] | None = None
        # the cluster's GCS (HOST:PORT): once it refuses connections, every Ray call waits a
        # minute and Ray then ends the process, so the executor stops asking it anything
        self._gcs = _gcs_address(self._ray)
        self._lost = False
        self._last_liveness = time.monotonic()
        fits = self._cluster_slots()
        if self._lost:
            raise self._lost_error()
        if fits < 1:
            need = f"{gpus_per_trial:g} GPU" if gpus_per_trial else f"{cpus_per_trial:g} CPU"
            raise ExecutorError(f"the Ray cluster has no room for one trial ({need} each)")
        self._slots = min(workers, fits) if workers is not None else fits
        self._actor_class = self._ray.remote(_TrialActor).options(
            num_cpus=cpus_per_trial, num_gpus=gpus_per_trial, max_restarts=0
        )
        self._actors: dict[int, Any] = {}  # slot -> live actor
        self._idle = list(range(self._slots))
        self._running: dict[Any, _Flight] = {}  # the trial's result ref -> its flight
        self._budget_ends: float | None = None  # time.monotonic() at the sweep budget's end

    def end_at(self, budget_ends: float | None) -> None:
        """Stop trials still running at ``budget_ends`` (a ``time.monotonic()`` reading): their
        actors are killed and they come back ``interrupted``."""
        self._budget_ends = budget_ends

    def _cluster_slots(self) -> int:
        """Trials the cluster's live nodes can hold at once (asked of Ray at most every
        :data:`_RESOURCES_TTL_S`, and at once after an actor died); 0 once the cluster is
        found gone."""
        now = time.monotonic()
        if self._resources is None or now - self._resources[0] > _RESOURCES_TTL_S:
            resources = self._ask_gcs(self._ray.cluster_resources)
            if resources is not None:
                self._resources = (now, resources)
        if self._lost or self._resources is None:
            return 0
        resources = self._resources[1]
        if self.gpus_per_trial > 0:
            return int(resources.get("GPU", 0) // self.gpus_per_trial)
        return int(resources.get("CPU", 0) // self.cpus_per_trial)

    def _ask_gcs(self, question: Callable[[], Any]) -> Any:
        """The answer to ``question`` (a Ray call its GCS answers), or None once the GCS
        refuses connections: Ray's own call then waits a minute, unanswered, before Ray ends
        the process. It is asked in a thread of its own, while this one checks the GCS every
        :data:`_GCS_PATIENCE_S` it goes unanswered (a GCS that takes connections but is slow,
        on a loaded machine, is waited for); a call left waiting on a lost cluster ends with
        the process."""
        if self._lost:
            return None
        if self._gcs is None:  # not watched
            return question()
        answer: list[Any] = []
        error: list[BaseException] = []

        def ask() -> None:
            try:
                answer.append(question())
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                error.append(exc)

        thread = threading.Thread(target=ask, name="autotune-ray-gcs", daemon=True)
        thread.start()
        while True:
            thread.join(_GCS_PATIENCE_S)
            if not thread.is_alive():
                break
            if self._cluster_gone():
                return None
        if error:
            raise error[0]
        return answer[0]

    @property
    def capacity(self) -> int:
        """The trials the cluster can run at once now. Once its GCS is found gone: 0 while
        trials are in flight (the next :meth:`wait_any` hands them back ``interrupted``), then
        :class:`ClusterLost`."""
        slots = min(self._slots, self._cluster_slots())
        if self._lost and not self._running:
            raise self._lost_error()
        return slots

    @property
    def side_by_side(self) -> int:
        """The slots, each an actor of its own: what the sweep's trials ran side by side by,
        read once the executor is closed (the sweep's summary) without asking the cluster,
        which a stop signal sent to the whole process group (``timeout``, ``kill -TERM -PGID``)
        ends along with the driver."""
        return self._slots

    def _lost_error(self) -> ClusterLost:
        """The one-line error of a cluster whose GCS stopped answering."""
        return ClusterLost(
            f"the Ray cluster (GCS {self._gcs}) stopped answering: the sweep stopped; its "
            "finished trials are stored: run the same command again once the cluster is back"
        )

    def _cluster_gone(self) -> bool:
        """Whether the cluster's GCS refuses a connection (the cluster stopped); checked
        after an actor is lost, and every :data:`_LIVENESS_EVERY_S` of waiting."""
        self._last_liveness = time.monotonic()
        if self._lost or self._gcs is None:
            return self._lost
        try:
            check_reachable(self._gcs, timeout_s=2.0)
        except ExecutorError:
            self._lost = True
        return self._lost

    def _all_interrupted(self, finished: list[Finished]) -> list[Finished]:
        """The cluster is gone: every trial still running comes back ``interrupted`` (it is
        measured again on resume), with those that ``finished`` already."""
        now = time.perf_counter()
        for ref, flight in list(self._running.items()):
            del self._running[ref]
            self._idle.append(flight.slot)
            seconds = now - (flight.started or flight.submitted)
            result = TrialResult(TrialStatus.INTERRUPTED, "the Ray cluster stopped while it ran",
                                 duration_s=seconds)  # fmt: skip
            finished.append(Finished(flight.ticket, result, seconds, f"ray actor {flight.slot}"))
        self._actors = {}  # died with the cluster: nothing to kill
        return finished

    @property
    def in_flight(self) -> int:
        return len(self._running)

    def running_on(self) -> dict[int, str]:
        """The actor each trial in flight runs on (its node is known once it answers)."""
        return {f.ticket: f"ray actor {f.slot}" for f in getattr(self, "_running", {}).values()}

    def submit(
        self, ticket: int, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> None:
        if not self._idle:
            raise RuntimeError("submit() with every slot busy")
        # a slot whose actor lives first: a dead one's new actor needs room the cluster may
        # have lost with a node
        slot = min(self._idle, key=lambda i: (i not in self._actors, i))
        self._idle.remove(slot)
        actor = self._actors.get(slot)
        now = time.perf_counter()
        flight = _Flight(slot, ticket, submitted=now, started=now)
        if actor is None:
            actor = self._actor_class.remote(self.workload, self.problem, self.prune_rule)
            self._actors[slot] = actor
            flight.ready_ref, flight.started = actor.__ray_ready__.remote(), None
        self._running[actor.evaluate.remote(config)] = flight

    def wait_any(self) -> list[Finished]:
        if not self._running:
            raise RuntimeError("wait_any() with no trial in flight")
        while True:
            ready, _ = self._ray.wait(list(self._running), num_returns=1, timeout=_POLL_S)
            finished = [self._collect(ref) for ref in ready]
            if self._lost or (
                not finished and time.monotonic() - self._last_liveness > _LIVENESS_EVERY_S
                and self._cluster_gone()
            ):  # fmt: skip
                return self._all_interrupted(finished)
            self._note_started_actors()
            now = time.perf_counter()
            over = self._budget_ends is not None and time.monotonic() >= self._budget_ends
            for ref, flight in list(self._running.items()):
                if over:
                    why = "the sweep's time budget ended while it ran; Ray actor killed"
                    finished.append(self._time_out(ref, why, TrialStatus.INTERRUPTED))
                    continue
                reason = flight.clock(now, self.timeout_s, self.start_timeout_s)
                if reason is not None:
                    finished.append(self._time_out(ref, reason))
            if finished:
                return finished

    def poll(self) -> list[Finished]:
        """The trials finished by now (their clocks and the budget are :meth:`wait_any`'s)."""
        if not self._running or self._lost:
            return []
        ready, _ = self._ray.wait(list(self._running), num_returns=len(self._running),
                                  timeout=0)  # fmt: skip
        return [self._collect(ref) for ref in ready]

    def _note_started_actors(self) -> None:
        """Start the clock of each trial whose new actor has become ready since the last poll."""
        waiting = {f.ready_ref: f for f in self._running.values() if f.started is None}
        if not waiting:
            return
        ready, _ = self._ray.wait(list(waiting), num_returns=len(waiting), timeout=0)
        now = time.perf_counter()
        for ref in ready:
            waiting[ref].started = now

    def _collect(self, ref: Any) -> Finished:
        flight = self._running.pop(ref)
        slot, ticket = flight.slot, flight.ticket
        start = flight.started if flight.started is not None else flight.submitted
        self._idle.append(slot)
        try:
            result, node = self._ray.get(ref)
            where = f"ray actor {slot} on {node}"
        except self._ray.exceptions.RayError as exc:
            self._actors.pop(slot, None)  # dead: the slot's next trial gets a new actor
            self._resources = None  # its node may be gone: ask the cluster again
            reason, status = _lost_reason(exc), TrialStatus.CRASHED
            if self._cluster_gone():  # not the config's doing: measured again on resume
                status, reason = TrialStatus.INTERRUPTED, "the Ray cluster stopped while it ran"
            result, where = TrialResult(status, reason), f"ray actor {slot}"
        seconds = time.perf_counter() - start
        if not result.duration_s:
            result.duration_s = seconds
        return Finished(ticket, result, seconds, worker=where)

    def _time_out(
        self, ref: Any, reason: str, status: TrialStatus = TrialStatus.TIMEOUT
    ) -> Finished:
        flight = self._running.pop(ref)
        slot, ticket = flight.slot, flight.ticket
        self._idle.append(slot)
        actor = self._actors.pop(slot, None)
        if actor is not None:
            self._ray.kill(actor)
        seconds = time.perf_counter() - (flight.started or flight.submitted)
        return Finished(
            ticket, TrialResult(status, reason, duration_s=seconds), seconds,
            worker=f"ray actor {slot}",
        )  # fmt: skip

    def close(self) -> None:
        if getattr(self, "_lost", False):  # every call to a stopped cluster waits a minute
            self._actors, self._running = {}, {}
            if self._started and self._ray.is_initialized():
                with contextlib.suppress(Exception):
                    self._ray.shutdown()
                self._started = False
            return
        for actor in getattr(self, "_actors", {}).values():
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(actor)
        self._actors = {}
        self._running = {}
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False
