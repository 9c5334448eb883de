"""Request traces: a JSONL file of arrival, prompt_len, output_len, read and checked."""

import pytest

from autotune.objectives.serving_trace import TraceEntry, load_trace


def test_a_trace_file_is_read_in_arrival_order_blank_lines_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival": 0.5, "prompt_len": 8, "output_len": 4}\n\n'
                    '{"arrival": 0.0, "prompt_len": 16, "output_len": 2}\n')  # fmt: skip
    assert load_trace(path) == [TraceEntry(0.0, 16, 2), TraceEntry(0.5, 8, 4)]


@pytest.mark.parametrize("text, says", [
    # a missing field read "not a trace line ('output_len')", a list "list indices must be
    # integers or slices, not str": Python's own words for what went wrong inside
    ('{"arrival": 0, "prompt_len": 5}\n', 't.jsonl:1: no "output_len" field: a line is a JSON '
                                          'object {"arrival": seconds, "prompt_len": tokens, '
                                          '"output_len": tokens}'),
    ('{"prompt_len": 5}\n', 't.jsonl:1: no "arrival" field: a line is a JSON object'),
    ('[0, 5, 3]\n', 't.jsonl:1: a line must be a JSON object {"arrival": seconds, "prompt_len": '
                    'tokens, "output_len": tokens}, not a list'),
    ('{"arrival": 0, "prompt_len": 4, "output_len": 1}\n"x"\n', "t.jsonl:2: a line must be a "
                                                                "JSON object {"),
    ("null\n", "t.jsonl:1: a line must be a JSON object {"),
    ('{"arrival": 0, "prompt_len": 4, "output_len": 1}\nnot json\n',
     "t.jsonl:2: not JSON: Expecting value at column 1"),
    ('{"arrival": 0, "prompt_len": -5, "output_len": 3}\n', "t.jsonl:1: a request needs"),
    ('{"arrival": -1, "prompt_len": 5, "output_len": 3}\n', "t.jsonl:1: a request needs"),
    ('{"arrival": 0, "prompt_len": 5, "output_len": 0}\n', "t.jsonl:1: a request needs"),
    ("\n\n", "t.jsonl: the trace holds no request"),
    # these gave an OverflowError traceback, a trial that never ended, a silent truncation to
    # 10 and a prompt of one token
    ('{"arrival": 0, "prompt_len": 1e400, "output_len": 3}\n',
     "t.jsonl:1: prompt_len must be a whole number of tokens, not 1e400"),
    ('{"arrival": 0, "prompt_len": 4, "output_len": 3}\n'
     '{"arrival": Infinity, "prompt_len": 5, "output_len": 3}\n',
     "t.jsonl:2: arrival must be a finite number of seconds, not Infinity"),
    ('{"arrival": NaN, "prompt_len": 5, "output_len": 3}\n', "t.jsonl:1: arrival must be a fin"),
    ('{"arrival": 1e999, "prompt_len": 5, "output_len": 3}\n', "arrival must be a finite number "
                                                             "of seconds, not 1e999"),
    ('{"arrival": 0, "prompt_len": 10.9, "output_len": 3}\n',
     "t.jsonl:1: prompt_len must be a whole number of tokens, not 10.9"),
    ('{"arrival": 0, "prompt_len": true, "output_len": 3}\n',
     "t.jsonl:1: prompt_len must be a whole number of tokens, not true"),
    ('{"arrival": 0, "prompt_len": 5, "output_len": "3"}\n',
     't.jsonl:1: output_len must be a whole number of tokens, not "3"'),
    ('{"arrival": "soon", "prompt_len": 5, "output_len": 3}\n',
     't.jsonl:1: arrival must be a finite number of seconds, not "soon"'),
    ("[" * 100_000 + "\n", "t.jsonl:1: not JSON: nested too deeply to read"),
])  # fmt: skip
def test_a_trace_no_server_could_replay_is_refused_naming_the_line(tmp_path, text, says):
    # a negative prompt failed every trial; an empty file said "max() arg is an empty sequence"
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        load_trace(path)
    assert says in str(refused.value) and str(refused.value).startswith(str(path))
    assert "\n" not in str(refused.value)


def test_whole_numbers_written_as_floats_are_lengths(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival": 0, "prompt_len": 8.0, "output_len": 4}\n')
    assert load_trace(path) == [TraceEntry(0.0, 8, 4)]


@pytest.mark.parametrize("workload", ["serving", "server"])
def test_a_recorded_traces_timestamps_are_replayed_from_its_first_arrival(tmp_path, workload):
    # arrivals of Unix time (1733500000.0) had every trial wait 55 years for its first request:
    # each one timed out ("no result after 300.0 s; worker killed"), the trace never named
    from autotune.objectives.server import ServerObjective
    from autotune.objectives.serving import ServingObjective

    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival": 1733500000.75, "prompt_len": 8, "output_len": 4}\n'
                    '{"arrival": 1733500000.0, "prompt_len": 16, "output_len": 2}\n'
                    '{"arrival": 1733500000.5, "prompt_len": 4, "output_len": 3}\n')  # fmt: skip
    shifted = [TraceEntry(0.0, 16, 2), TraceEntry(0.5, 4, 3), TraceEntry(0.75, 8, 4)]
    assert load_trace(path) == shifted
    cls = {"serving": ServingObjective, "server": ServerObjective}[workload]
    obj = cls({**cls.default_problem({"type": "cpu"}), "device": "cpu", "trace": str(path)})
    assert (obj.entries if workload == "serving" else obj.trace) == shifted


def test_a_file_that_is_not_utf8_or_cannot_be_read_is_refused_naming_it(tmp_path):
    # the decoding error named neither the file nor the line
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"arrival": 0, "prompt_len": 4, "output_len": 3}\n'
                     b'{"arrival": 0, "prompt_len": 4, "output_len": 3}\xff\n')  # fmt: skip
    with pytest.raises(ValueError) as refused:
        load_trace(path)
    assert str(refused.value) == f"{path}:2: not UTF-8 text (byte 0xff at column 49)"
    with pytest.raises(ValueError) as refused:
        load_trace(tmp_path / "none.jsonl")
    assert (
        str(refused.value) == f"{tmp_path / 'none.jsonl'}: cannot read the trace: No such "
        "file or directory"
    )


def test_a_trace_file_drops_the_poisson_keys_it_replaces():
    from autotune.objectives.serving_trace import POISSON_KEYS, without_poisson_keys

    poisson = {"trace": "", "rate": 4.0, "num_requests": 8, "prompt_len": 32, "output_len": 8,
               "seed": 3, "vocab": 512}  # fmt: skip
    assert without_poisson_keys(poisson) == poisson  # no file: the Poisson trace's keys apply
    assert without_poisson_keys({**poisson, "trace": "t.jsonl"}) == {
        "trace": "t.jsonl", "seed": 3, "vocab": 512}  # fmt: skip
    assert set(POISSON_KEYS) < set(poisson)


@pytest.mark.parametrize("workload", ["serving", "server"])
def test_a_trace_files_sweep_neither_stores_nor_shows_the_poisson_keys(tmp_path, workload):
    # a trace file replaces the Poisson trace's rate and lengths: the sweep's header and its
    # stored problem listed them (rate=20.0,num_requests=16,...) as if they applied
    import io

    import optuna
    from rich.console import Console

    from autotune.progress import ProgressDisplay
    from autotune.sweep_setup import build_settings

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_len": 5, "output_len": 3}\n')
    settings = build_settings(
        workload=workload, space=None, problem={"trace": str(trace)}, objective=None,
        sampler="auto", trials=1, time_budget_s=None, seed=0, storage="memory", study=None,
        trial_timeout_s=None, device={"type": "cpu", "name": "cpu"}, replay=None, params=None,
        metric=None, maximize=True, command=f"autotune tune {workload}",
    )  # fmt: skip
    assert settings.problem["trace"] == str(trace) and "seed" in settings.problem
    assert not {"rate", "num_requests", "prompt_len", "output_len"} & set(settings.problem)
    out = io.StringIO()
    ProgressDisplay(Console(file=out, width=1000)).on_start(settings, optuna.create_study(), 0)
    header = out.getvalue().splitlines()[0]
    assert f"trace={trace}" in header
    assert not any(f"{key}=" in header for key in ("rate", "num_requests", "_len"))


def test_a_poisson_key_given_beside_a_trace_file_is_refused_naming_it(tmp_path):
    from autotune.sweep_setup import SetupError, build_settings

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_len": 5, "output_len": 3}\n')
    with pytest.raises(SetupError) as refused:
        build_settings(
            workload="serving", space=None, problem={"trace": str(trace), "rate": 5.0},
            objective=None, sampler="auto", trials=1, time_budget_s=None, seed=0,
            storage="memory", study=None, trial_timeout_s=None,
            device={"type": "cpu", "name": "cpu"}, replay=None, params=None, metric=None,
            maximize=True, command="autotune tune serving",
        )  # fmt: skip
    assert str(refused.value) == (
        "--problem: rate=5.0 does not apply to serving with the other values given; leave it out"
    )


def test_a_trace_that_is_no_regular_file_or_too_long_is_refused(tmp_path):
    # a FIFO blocked the command for good; a process substitution crashed every trial (its
    # worker found /dev/fd/63 gone); num_requests=1e8 grew gigabytes before any trial
    import os

    from autotune.objectives.serving_trace import MOST_REQUESTS, poisson_trace

    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(ValueError, match="fifo.jsonl: the trace must be a regular file"):
        load_trace(tmp_path / "fifo.jsonl")
    with pytest.raises(ValueError, match="num_requests=1000001: at most 1,000,000"):
        poisson_trace(rate=40.0, num_requests=MOST_REQUESTS + 1, prompt_len=8, output_len=4)


@pytest.mark.parametrize("workload", ["serving", "server"])
def test_a_tpot_limit_over_a_trace_of_one_token_outputs_is_refused(tmp_path, workload):
    # every trial was slo_violated ("tpot_p99_ms not measured") while goodput counted the
    # same requests as within the SLO
    from autotune.setup_error import SetupError
    from autotune.sweep_setup import build_settings

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_len": 5, "output_len": 1}\n' * 2)

    def build(slo):
        return build_settings(
            workload=workload, space=None, problem={"trace": str(trace)}, objective=None,
            sampler="auto", trials=1, time_budget_s=None, seed=0, storage="memory",
            study=None, trial_timeout_s=None, device={"type": "cpu", "name": "cpu"},
            replay=None, params=None, metric=None, maximize=True,
            command=f"autotune tune {workload}", slo=slo,
        )  # fmt: skip

    with pytest.raises(SetupError, match=r"^--slo: tpot_p99_ms=50: no request of the trace "):
        build({"ttft_p99_ms": 500.0, "tpot_p99_ms": 50.0})
    assert build({"ttft_p99_ms": 500.0}).problem["slo_ttft_ms"] == 500.0  # TTFT is measured
    trace.write_text('{"arrival": 0.0, "prompt_len": 5, "output_len": 2}\n')
    build({"tpot_p99_ms": 50.0})  # one gap to time


@pytest.mark.parametrize("line, says", [
    ('{"arrival": 0, "prompt_len": 10000000000, "output_len": 4}',
     "h.jsonl:2: prompt_len=10,000,000,000: a request holds at most 1,048,576 (2**20) tokens"),
    ('{"arrival": 0, "prompt_len": 4, "output_len": 1048577}',
     "h.jsonl:2: output_len=1,048,577: a request holds at most 1,048,576 (2**20) tokens"),
])  # fmt: skip
def test_a_request_longer_than_any_server_takes_is_refused_before_the_sweep(tmp_path, line, says):
    # the server workload took a prompt of 10**10 tokens: each trial's worker built it as a
    # list of token ids (9 GB) until the trial timed out; serving refused it (max_context)
    import subprocess
    import sys

    from autotune.objectives.serving_trace import MOST_TOKENS, poisson_trace

    path = tmp_path / "h.jsonl"
    path.write_text('{"arrival": 0, "prompt_len": 1048576, "output_len": 1048576}\n' + line)
    with pytest.raises(ValueError) as refused:
        load_trace(path)
    assert str(refused.value).startswith(f"{path}:2: ") and says in str(refused.value)
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "server", "--problem", f"trace={path}",
         "--trials", "1", "--storage", "memory"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert says in done.stderr
    with pytest.raises(ValueError, match=r"^prompt_len=700000: its requests are drawn up to "):
        poisson_trace(rate=1.0, num_requests=1, prompt_len=700_000, output_len=4)
    assert poisson_trace(1.0, 1, MOST_TOKENS * 2 // 3, 4)[0].prompt_len <= MOST_TOKENS


def test_a_trace_path_under_home_is_read_as_the_output_check_reads_it(tmp_path, monkeypatch):
    # `--problem trace=~/t.jsonl` was refused as '~/t.jsonl: cannot read the trace: No such
    # file or directory', while --output ~/t.jsonl was refused as the trace it names
    import os
    import subprocess
    import sys

    (tmp_path / "t.jsonl").write_text('{"arrival": 0.0, "prompt_len": 5, "output_len": 3}\n')
    env = {**os.environ, "HOME": str(tmp_path)}
    tuned = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "serving", "--problem", "trace=~/t.jsonl",
         "--trials", "1", "--finish-top", "0", "--executor", "inline", "--storage", "memory",
         "--output", str(tmp_path / "best.json")],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert tuned.returncode == 0 and "Traceback" not in tuned.stderr, tuned.stderr
    assert "trace=~/t.jsonl" in tuned.stderr and (tmp_path / "best.json").is_file()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_trace("~/t.jsonl") == [TraceEntry(0.0, 5, 3)]
