"""The Ray executor's watch of its cluster's GCS, with a stand-in Ray (no cluster): a question
the GCS never answers (Ray's waits a minute, then Ray ends the process) does not hold the sweep.
"""

import socket
import threading
import time
from types import SimpleNamespace

import pytest

import autotune.executors.ray as ray_executor
from autotune.executors.base import ClusterLost


class StandInRay:
    """What the executor asks of Ray, answered here: a GCS at ``gcs`` (HOST:PORT), and
    ``cluster_resources`` that waits while ``hang`` is set (until ``release``, or 20 s: a
    regression fails, not hangs)."""

    def __init__(self, gcs: str) -> None:
        self.gcs, self.hang, self.release = gcs, threading.Event(), threading.Event()
        self.exceptions = SimpleNamespace(RayError=RuntimeError)

    def is_initialized(self) -> bool:
        return True

    def get_runtime_context(self) -> SimpleNamespace:
        return SimpleNamespace(gcs_address=self.gcs)

    def cluster_resources(self) -> dict[str, float]:
        if self.hang.is_set():
            self.release.wait(timeout=20)
        return {"CPU": 2.0}

    def remote(self, cls: type) -> SimpleNamespace:
        return SimpleNamespace(options=lambda **_: None)


@pytest.fixture
def gcs():
    """A listening socket standing for the GCS: closed, its port refuses connections."""
    server = socket.create_server(("127.0.0.1", 0))
    yield server
    server.close()


def executor_on(ray: StandInRay, monkeypatch) -> ray_executor.RayExecutor:
    monkeypatch.setattr(ray_executor, "import_ray", lambda: ray)
    monkeypatch.setattr(ray_executor, "_GCS_PATIENCE_S", 0.2)
    monkeypatch.setattr(ray_executor, "_RESOURCES_TTL_S", 0.0)  # every capacity asks
    return ray_executor.RayExecutor("faults", {}, address="127.0.0.1:1")


def test_a_gcs_gone_while_the_resources_are_asked_ends_the_capacity_at_once(gcs, monkeypatch):
    # the flake: the head killed between a trial told and the next launch, the driver's next
    # question waited on Ray (60 s, then Ray ended the process, past the test's 50 s)
    ray = StandInRay(f"127.0.0.1:{gcs.getsockname()[1]}")
    executor = executor_on(ray, monkeypatch)
    assert executor.capacity == 2
    executor._running = {"a trial's ref": None}  # in flight: handed back by wait_any first
    ray.hang.set()
    gcs.close()
    started = time.monotonic()
    assert executor.capacity == 0
    assert time.monotonic() - started < 5  # a patience or two, not Ray's minute
    executor._running = {}
    with pytest.raises(ClusterLost, match=r"the Ray cluster \(GCS 127.0.0.1:\d+\) stopped"):
        executor.capacity  # noqa: B018 - the property raises
    ray.release.set()


def test_a_slow_gcs_that_still_takes_connections_is_waited_for(gcs, monkeypatch):
    ray = StandInRay(f"127.0.0.1:{gcs.getsockname()[1]}")
    executor = executor_on(ray, monkeypatch)
    ray.hang.set()
    threading.Timer(1.0, ray.release.set).start()  # five patiences: checked, found alive
    assert executor.capacity == 2
    assert not executor._lost


def test_the_slots_side_by_side_are_read_without_asking_a_cluster_gone(gcs, monkeypatch):
    # a stop signal sent to the process group (`timeout 300 autotune tune ... --executor ray`)
    # ends the local Ray with the driver: the sweep's summary asked the closed executor's
    # capacity, found the GCS gone and ended 'the Ray cluster (GCS ...) stopped answering',
    # exit 1, where Ctrl-C's 'interrupted; finished trials are stored' belongs
    ray = StandInRay(f"127.0.0.1:{gcs.getsockname()[1]}")
    executor = executor_on(ray, monkeypatch)
    executor.close()
    ray.hang.set()
    gcs.close()
    started = time.monotonic()
    assert executor.side_by_side == 2
    assert time.monotonic() - started < 1  # no question to the cluster
    ray.release.set()
