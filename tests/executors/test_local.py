import pytest

from autotune.executors.local import LocalExecutor
from autotune.failures import TrialStatus


def test_two_workers_run_side_by_side_each_pinned_to_its_gpu():
    with LocalExecutor("faults", {}, workers=2, gpu_ids=["0", "1"], timeout_s=60) as executor:
        assert executor.capacity == 2
        executor.submit(0, {"fault": "none", "delay": 2.0})
        executor.submit(1, {"fault": "none", "delay": 2.0})
        finished = []
        while len(finished) < 2:
            finished += executor.wait_any()
    metrics = {f.ticket: f.result.measurement.metrics for f in finished}
    assert {m["cuda_visible_devices"] for m in metrics.values()} == {"0", "1"}
    assert metrics[0]["pid"] != metrics[1]["pid"]
    # they overlapped: each started before the other ended
    assert metrics[0]["started_at"] < metrics[1]["ended_at"]
    assert metrics[1]["started_at"] < metrics[0]["ended_at"]
    assert {f.worker for f in finished} == {"local worker 0 on GPU 0", "local worker 1 on GPU 1"}


def test_a_worker_that_dies_costs_its_trial_only():
    with LocalExecutor("faults", {}, workers=2, timeout_s=60) as executor:
        executor.submit(0, {"fault": "none", "delay": 3.0})
        executor.submit(1, {"fault": "segfault"})
        (crashed,) = executor.wait_any()
        assert crashed.ticket == 1 and crashed.result.status is TrialStatus.CRASHED
        assert "SIGSEGV" in crashed.result.reason
        executor.submit(2, {"fault": "none", "score": 5.0})  # the slot gets a new worker
        rest = []
        while len(rest) < 2:
            rest += executor.wait_any()
        assert {f.ticket: f.result.status for f in rest} == {0: TrialStatus.OK, 2: TrialStatus.OK}
        assert executor.workers_started == 3


def test_closing_ends_a_trial_still_running():
    executor = LocalExecutor("faults", {}, workers=1, timeout_s=600)
    executor.submit(0, {"fault": "hang", "seconds": 600})
    executor.close()  # returns once the worker is ended, not after 600 s
    assert executor.in_flight == 1  # never handed back: the driver marks it interrupted


def test_a_ctrl_c_inside_a_slot_threads_start_still_lets_the_executor_close(monkeypatch):
    """``Thread.start()`` waits for the new thread to run, and a Ctrl-C lands there as a
    KeyboardInterrupt; closing the executor then failed on joining that thread ("cannot join
    thread before it is started", a traceback instead of the sweep's 'interrupted')."""
    import threading

    executor = LocalExecutor("faults", {}, workers=1, timeout_s=30)
    real_start = threading.Thread.start

    def interrupted_start(thread):
        if thread.name.startswith("autotune-slot-"):
            raise KeyboardInterrupt
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    with pytest.raises(KeyboardInterrupt):
        executor.submit(0, {"fault": "none"})
    monkeypatch.undo()
    executor.close()  # no RuntimeError
