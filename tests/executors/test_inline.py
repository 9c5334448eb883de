from autotune.executors.inline import InlineExecutor
from autotune.failures import TrialStatus


def test_trials_come_back_in_the_order_their_durations_say(tmp_path):
    import pandas as pd

    table = tmp_path / "t.csv"
    pd.DataFrame(
        {"x": [1, 2, 3, 4], "v": [1.0, 2.0, 3.0, 4.0], "duration_s": [5.0, 1.0, 1.0, 0.5],
         "status": ["ok"] * 4}
    ).to_csv(table, index=False)  # fmt: skip
    problem = {"table": str(table), "params": ["x"], "metric": "v"}
    with InlineExecutor("replay", problem, capacity=2) as executor:
        executor.submit(1, {"x": 1})  # 0 -> 5 s
        executor.submit(2, {"x": 2})  # 0 -> 1 s
        assert executor.free == 0
        assert [f.ticket for f in executor.wait_any()] == [2]
        executor.submit(3, {"x": 3})  # 1 -> 2 s
        assert [f.ticket for f in executor.wait_any()] == [3]
        executor.submit(4, {"x": 4})  # 2 -> 2.5 s
        assert [f.ticket for f in executor.wait_any()] == [4]
        assert [f.ticket for f in executor.wait_any()] == [1]
        assert executor.clock_s == 5.0 and executor.in_flight == 0


def test_one_slot_returns_trials_in_submission_order_and_failures_as_results():
    with InlineExecutor("faults", {}) as executor:
        executor.submit(7, {"fault": "wrong_result"})
        (finished,) = executor.wait_any()
        assert finished.ticket == 7 and finished.result.status is TrialStatus.WRONG_RESULT
        assert "relative error" in finished.result.reason
