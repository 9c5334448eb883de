"""Request traces: a JSONL file of arrival, prompt_len, output_len, read and checked."""

import pytest

from autotune.objectives.serving_trace import TraceEntry, load_trace


def test_a_trace_file_is_read_in_arrival_order_blank_lines_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival": 0.5, "prompt_len": 8, "output_len": 4}\n\n'
                    '{"arrival": 0.0, "prompt_len": 16, "output_len": 2}\n')  # fmt: skip
    assert load_trace(path) == [TraceEntry(0.0, 16, 2), TraceEntry(0.5, 8, 4)]


@pytest.mark.parametrize("text, says", [
    ('{"arrival": 0, "prompt_len": 5}\n', "t.jsonl:1: not a trace line ('output_len')"),
    ('{"arrival": 0, "prompt_len": 4, "output_len": 1}\nnot json\n', "t.jsonl:2: not a trace"),
    ('{"arrival": 0, "prompt_len": -5, "output_len": 3}\n', "t.jsonl:1: a request needs"),
    ('{"arrival": -1, "prompt_len": 5, "output_len": 3}\n', "t.jsonl:1: a request needs"),
    ('{"arrival": 0, "prompt_len": 5, "output_len": 0}\n', "t.jsonl:1: a request needs"),
    ("\n\n", "t.jsonl: the trace holds no request"),
])  # fmt: skip
def test_a_trace_no_server_could_replay_is_refused_naming_the_line(tmp_path, text, says):
    # a negative prompt failed every trial; an empty file said "max() arg is an empty sequence"
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError) as refused:
        load_trace(path)
    assert says in str(refused.value)
