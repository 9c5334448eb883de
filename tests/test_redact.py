"""Credentials stay out of what autotune stores, writes and prints."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
import pytest

from autotune.redact import redact, redact_url, secrets_in, secrets_of_values
from autotune.storage import StorageError, open_storage


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://tuner:s3cret@db:5432/sweeps", "postgresql://tuner:***@db:5432/sweeps"),
        ("postgresql+psycopg://u:p@ss:w@h/db?sslmode=require",
         "postgresql+psycopg://u:***@h/db?sslmode=require"),
        ("mysql://u:p%40ss@h/db", "mysql://u:***@h/db"),
        ("postgresql://only-user@h/db", "postgresql://only-user@h/db"),
        ("sqlite:///autotune.db", "sqlite:///autotune.db"),
        ("postgresql://h/db?user=u&password=s3cret", "postgresql://h/db?user=u&password=***"),
        ("postgresql://u@h/db?PASSWORD=s3cret&sslmode=require",
         "postgresql://u@h/db?PASSWORD=***&sslmode=require"),
        ("mysql://h/db?pwd=s3cret", "mysql://h/db?pwd=***"),
        ("postgresql://u:s3cret/x@h:1/db", "postgresql://u:***@h:1/db"),
        ("postgresql://u:s3c ret?@h:1/db", "postgresql://u:***@h:1/db"),
        ("postgresql://u:p@h/db?sslpassword=s3cret", "postgresql://u:***@h/db?sslpassword=***"),
    ],
)  # fmt: skip
def test_a_urls_password_is_shown_as_stars(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_every_url_in_a_command_line_is_redacted() -> None:
    line = "autotune tune --storage postgresql://a:b@h/d --study s --note mysql://c:d@e/f"
    assert redact(line) == (
        "autotune tune --storage postgresql://a:***@h/d --study s --note mysql://c:***@e/f"
    )


def test_a_quoted_url_in_a_message_hides_a_password_with_blanks() -> None:
    message = "storage URL 'postgresql://u:s3c ret/x@h:1/db': cannot connect"
    assert redact(message) == "storage URL 'postgresql://u:***@h:1/db': cannot connect"


def test_a_storage_error_never_shows_the_password() -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StorageError) as info:
        open_storage("postgresql://nobody:s3cret-pw@127.0.0.1:1/none")
    assert "s3cret-pw" not in str(info.value) and "nobody:***@" in str(info.value)


def _cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True,
                          text=True, timeout=240, env={**os.environ, **(env or {})},
                          cwd=cwd)  # fmt: skip


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://nobody:s3cret-pw@127.0.0.1:1/none", "nobody:***@"),
        ("postgresql://127.0.0.1:1/none?user=nobody&password=s3cret-pw", "password=***"),
    ],
)
def test_the_cli_error_for_a_bad_database_keeps_the_password_out(url: str, shown: str) -> None:
    pytest.importorskip("psycopg")
    done = _cli("trials", "--storage", url)
    assert done.returncode == 2
    assert "s3cret-pw" not in done.stderr + done.stdout and shown in done.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # a mistyped separator: the URL matched no pattern and was printed whole
        ("postgresql:/nobody:s3cret-pw@127.0.0.1:1/none", "nobody:***@"),
        ("postgresql//nobody:s3cret-pw@127.0.0.1:1/none", "nobody:***@"),
        ("postgresql:nobody:s3cret-pw@127.0.0.1:1/none", "nobody:***@"),
        ("postgresql:\\nobody:s3cret-pw@127.0.0.1:1/none", "nobody:***@"),
        # a key written with %-escapes, which the driver decodes and uses as the password
        ("postgresql://nobody@127.0.0.1:1/none?pass%77ord=s3cret-pw", "pass%77ord=***"),
        ("postgresql://nobody@127.0.0.1:1/none?%70assword=s3cret-pw&x=1", "%70assword=***"),
    ],
)
def test_a_mistyped_url_or_an_escaped_key_keeps_the_password_out(url: str, shown: str) -> None:
    done = _cli("studies", "--storage", url)
    assert done.returncode == 2
    assert "s3cret-pw" not in done.stderr + done.stdout and shown in done.stderr, done.stderr
    assert redact(f"try {url} or '{url}'").count("***") == 2 and "s3cret" not in redact(url)
    assert "s3cret-pw" in secrets_in(url, whole_url=True) | secrets_in(url)


@pytest.mark.parametrize("password", ["s3cret/pw", "s3c ret pw", "s3cret?pw"])
def test_a_password_with_a_slash_blank_or_question_mark_stays_out(password: str) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://nobody:{password}@127.0.0.1:1/none"
    done = _cli("best", env={"AUTOTUNE_STORAGE": url})
    assert done.returncode == 2, done.stderr
    assert "s3c" not in done.stderr + done.stdout and "nobody:***@" in done.stderr


@pytest.fixture
def grid(tmp_path: Path) -> Path:
    rows = [{"BM": bm, "tflops": 100.0 + bm, "status": "ok"} for bm in (16, 32, 64)]
    pd.DataFrame(rows).to_csv(tmp_path / "grid.csv", index=False)
    return tmp_path / "grid.csv"


@pytest.mark.skipif(not os.environ.get("AUTOTUNE_TEST_POSTGRES_URL"), reason="needs PostgreSQL")
@pytest.mark.parametrize("form", ["user:password@", "?password="])
def test_a_sweep_on_a_password_database_stores_and_exports_no_password(
    grid, tmp_path, form
) -> None:
    url = os.environ["AUTOTUNE_TEST_POSTGRES_URL"]  # postgresql://autotune:autotune@...
    scheme, rest = url.split("://", 1)
    credentials, place = rest.split("@", 1)
    user, secret = credentials.split(":", 1)
    if form == "?password=":  # the same database, the password in the query string
        url = f"{scheme}://{user}@{place}?password={secret}"
    study = f"redact-{os.getpid()}-{len(form)}"
    tune = ["tune", "--replay", str(grid), "--params", "BM", "--metric", "tflops",
            "--maximize", "--sampler", "grid", "--study", study]  # fmt: skip
    done = _cli(*tune, "--storage", url, "--output", str(tmp_path / "best.json"))
    assert done.returncode == 0, done.stderr
    # the same storage from the environment: nothing on the command line at all
    exported = _cli("export", "--to", "yaml", "--study", study,
                    env={"AUTOTUNE_STORAGE": url})  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    record = json.loads((tmp_path / "best.json").read_text())
    assert (":***@" if form == "user:password@" else "password=***") in record["command"]
    for text in (done.stdout, done.stderr, exported.stdout, exported.stderr,
                 (tmp_path / "best.json").read_text()):  # fmt: skip
        assert f":{secret}@" not in text and f"password={secret}" not in text
    storage = optuna.storages.RDBStorage(url)  # what the database holds
    study_id = storage.get_study_id_from_name(study)
    attributes = [storage.get_study_user_attrs(study_id), storage.get_study_system_attrs(study_id)]
    attributes += [[t.user_attrs, t.system_attrs] for t in storage.get_all_trials(study_id)]
    dumped = json.dumps(attributes, default=str)
    assert f":{secret}@" not in dumped and f"password={secret}" not in dumped


def test_the_stored_command_line_hides_a_password_with_blanks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from autotune.cli import _command_line

    argv = ["autotune", "best", "--storage", "postgresql://u:a b@h/db", "--x=mysql://v:c/d@h/e"]
    monkeypatch.setattr(sys, "argv", argv)
    assert _command_line() == (
        "autotune best --storage 'postgresql://u:***@h/db' '--x=mysql://v:***@h/e'"
    )


def test_a_commands_password_is_blanked_also_where_it_stands_outside_a_url() -> None:
    """What a server started with a password prints may show it on its own: the passwords
    taken out of the problem's command are blanked wherever a reason holds them."""
    problem = {"command": "srv --db postgresql://admin:Hun%40terPW@db/prod {port}", "rate": 4}
    known = secrets_of_values(problem)
    assert known == {"Hun%40terPW", "Hun@terPW"}  # as written, and as the server decodes it
    said = "exited: args ['--db', 'postgresql://admin:Hun%40terPW@db/prod'] | auth Hun@terPW"
    assert redact(said, known) == (
        "exited: args ['--db', 'postgresql://admin:***@db/prod'] | auth ***"
    )


def test_a_storage_urls_password_is_found_as_redact_url_finds_it() -> None:
    assert secrets_in("postgresql://u:a b/c@h/db?sslpassword=k3y5", whole_url=True) == {
        "a b/c",
        "k3y5",
    }
    assert secrets_in("sqlite:///autotune.db", whole_url=True) == frozenset()


def test_a_known_password_too_short_or_already_stars_leaves_the_text_alone() -> None:
    # a one-letter password would blank that letter in every word: only its URL form goes
    assert redact("a crash in postgresql://u:a@h/db", known={"a"}) == (
        "a crash in postgresql://u:***@h/db"
    )
    assert redact("kept ***** as is", known={"*****"}) == "kept ***** as is"


@pytest.mark.parametrize(
    ("command", "shown", "secret"),
    [
        ("vllm serve m --api-key sk-live1 --port {port}",
         "vllm serve m --api-key *** --port {port}", "sk-live1"),
        ("srv --password=hunter2 -x", "srv --password=*** -x", "hunter2"),
        ("srv --db-password 'a b c' -x", "srv --db-password '***' -x", "a b c"),
        ('srv --HF_TOKEN="hf 1"', 'srv --HF_TOKEN="***"', "hf 1"),
        # an environment assignment was stored, shown and echoed in reasons as it stood
        ("env HF_TOKEN=hf_TOP python3 srv.py --port {port}",
         "env HF_TOKEN=*** python3 srv.py --port {port}", "hf_TOP"),
        ("env PGPASSWORD='a b' OPENAI_API_KEY=sk-9 srv",
         "env PGPASSWORD='***' OPENAI_API_KEY=*** srv", None),
    ],
)  # fmt: skip
def test_an_option_that_takes_a_secret_is_blanked_and_its_value_known(
    command: str, shown: str, secret: str
) -> None:
    # a server's command template holds an API key as often as a database URL
    from autotune.redact import redact_values, redacted_keys

    assert redact(command) == shown
    if secret is None:  # two of them
        assert secrets_of_values({"command": command}) == {"a b", "sk-9"}
        secret = "sk-9"
    assert secrets_of_values({"command": command}) >= {secret}
    assert redact(f"server said: bad key {secret}", secrets_in(command)) == (
        "server said: bad key ***"
    )
    assert redacted_keys(redact_values({"command": command})) == ["command"]  # given again


def test_options_that_only_look_like_secrets_are_left_alone() -> None:
    line = ("vllm serve m --max-num-batched-tokens 2048 --tokenizer t --secret-file /s "
            "--password --port 80 max_tokens=16 --x=a&csrf_token=1 --long-prefill-token-threshold "
            "0 --ssl-keyfile /k.pem --token-file /t --key-cache-dtype fp8 "
            "--db postgresql://h/d?sslkey=/k.pem&max_tokens=8&keys=2")  # fmt: skip
    assert redact(line) == line and secrets_in(line) == frozenset()


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("srv --uri http://x/y?access_token=SEKRET5555", "srv --uri http://x/y?access_token=***"),
        ("srv --model-url 'https://b.s3.amazonaws.com/m?X-Amz-Credential=AKIA%2F20241206&"
         "X-Amz-Signature=SEKRET5555&X-Amz-Security-Token=SEKRET6666&X-Amz-Expires=3600'",
         "srv --model-url 'https://b.s3.amazonaws.com/m?X-Amz-Credential=***&"
         "X-Amz-Signature=***&X-Amz-Security-Token=***&X-Amz-Expires=3600'"),
        ("srv --blob https://a.blob.core.windows.net/c?sv=2022&sig=SEKRET5555",
         "srv --blob https://a.blob.core.windows.net/c?sv=2022&sig=***"),
        ("srv --hook http://h/x?token=SEKRET5555&apikey=SEKRET6666&key=SEKRET7777",
         "srv --hook http://h/x?token=***&apikey=***&key=***"),
        ("srv --hook http://h/x?api_key=SEKRET5555&signature=SEKRET6666",
         "srv --hook http://h/x?api_key=***&signature=***"),
        ("srv --aws-secret-access-key SEKRET5555 --aws-access-key-id AKIA1",
         "srv --aws-secret-access-key *** --aws-access-key-id AKIA1"),
        ("srv --access-key=SEKRET5555 --secret SEKRET6666 --key SEKRET7777",
         "srv --access-key=*** --secret *** --key ***"),
        ("srv --auth-token SEKRET5555 --client-credentials 'SEKRET 6666'",
         "srv --auth-token *** --client-credentials '***'"),
    ],
)  # fmt: skip
def test_a_credential_in_a_urls_query_or_an_option_is_blanked_and_known(command, shown) -> None:
    # ?access_token=, ?X-Amz-Signature=, --aws-secret-access-key and --key X were stored,
    # shown in the sweep's header and echoed in a crashed server's reason in clear
    from autotune.redact import redact_values, redacted_keys

    assert redact(command) == shown
    secrets = secrets_of_values({"command": command})
    assert {"SEKRET5555"} <= secrets
    echoed = f"starting with {shlex.split(command)!r}, {command}"
    assert "SEKRET" not in redact(echoed, secrets)
    assert redacted_keys(redact_values({"command": command})) == ["command"]  # given again


ECHO = """
import sys
print("starting with", sys.argv, flush=True)
sys.exit(3)
"""


def test_a_crashed_servers_echo_of_its_credentials_stays_out_of_everything(tmp_path) -> None:
    # the header, the stored problem and the crashed reason held the access token and the
    # secret access key the server printed
    (tmp_path / "echo.py").write_text(ECHO)
    (tmp_path / "s.yaml").write_text("workload: server\nparameters:\n"
                                     "  max_num_seqs: {type: pow2, low: 4, high: 8}\n")  # fmt: skip
    command = (f"command={sys.executable} echo.py --port {{port}} -n {{max_num_seqs}} --uri "
               "http://x/y?access_token=SEKRET5555&X-Amz-Signature=SEKRET6666 "
               "--aws-secret-access-key SEKRET7777")  # fmt: skip
    # (the trial in the command's own process: redaction is the driver's, whichever executor)
    done = _cli("tune", "server", "--space", "s.yaml", "--problem", command, "--trials", "1",
                "--finish-top", "0", "--storage", "sqlite:///s.db", "--study", "s",
                "--executor", "inline", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1 and "--aws-secret-access-key ***" in done.stderr, done.stderr
    trials = _cli("trials", "--storage", "sqlite:///s.db", "--format", "csv", cwd=tmp_path)
    assert "crashed" in trials.stdout and "'--aws-secret-access-key', '***'" in trials.stdout
    for text in (done.stdout, done.stderr, trials.stdout, trials.stderr):
        assert "SEKRET" not in text
    assert b"SEKRET" not in (tmp_path / "s.db").read_bytes()


PLAIN = """
from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Plain(Objective):
    name, space, directions = "plain", "plain.yaml", {"v": "maximize"}

    def evaluate(self, config, report=None):
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Plain
"""


@pytest.mark.parametrize(
    "value",
    [
        "command=HF_TOKEN=hf_SEKRET5555 vllm serve m",  # an assignment after --problem's '='
        "command=srv --db postgresql://u:SEKRET5555@h/d",
    ],  # fmt: skip
)
def test_a_secret_in_a_problem_value_stays_out_of_the_stored_command_line(tmp_path, value):
    # the problem's value was stored as HF_TOKEN=***, but the command line stored beside it
    # (the export, the report's "reproduce:") kept --problem 'command=HF_TOKEN=hf_SEKRET5555 ...'
    (tmp_path / "plain.py").write_text(PLAIN)
    (tmp_path / "plain.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 4}\n")
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "./plain.py", "--trials", "2",
         "--storage", "sqlite:///v.db", "--study", "v", "--finish-top", "0",
         "--output", "best.json", "--problem", value],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "best.json").read_text())
    assert "***" in record["command"]
    for text in (done.stdout, done.stderr, (tmp_path / "best.json").read_text()):
        assert "SEKRET" not in text
    assert b"SEKRET" not in (tmp_path / "v.db").read_bytes()


def test_a_bad_url_from_the_environment_is_said_to_come_from_it(tmp_path) -> None:
    # the line named the URL alone: a user who never typed it could not tell where it was set
    done = _cli("studies", env={"AUTOTUNE_STORAGE": "redis://nobody:s3cret-pw@x/0"})
    assert done.returncode == 2
    assert done.stderr.strip().endswith("(from $AUTOTUNE_STORAGE)"), done.stderr
    assert "s3cret-pw" not in done.stderr
    typed = _cli("studies", "--storage", "redis://x/0", env={"AUTOTUNE_STORAGE": "redis://y/0"})
    assert typed.returncode == 2 and "AUTOTUNE_STORAGE" not in typed.stderr


@pytest.mark.parametrize(
    "text",
    ['srv --header "Authorization: Bearer tokS3CRET999" {port}', "bearer tokS3CRET999 refused",
     "curl -H Authorization:Basic tokS3CRET999", "authorization=Token tokS3CRET999"],
)  # fmt: skip
def test_an_http_credential_in_a_command_or_a_reason_is_left_out(text: str) -> None:
    # a Bearer header in a server's command template was stored and printed in clear
    assert "tokS3CRET999" not in redact(text) and "***" in redact(text)
    assert "tokS3CRET999" in secrets_in(text)


def test_a_blank_storage_variable_is_refused_not_read_as_unset(tmp_path) -> None:
    # AUTOTUNE_STORAGE=$DB_URL with DB_URL unset: the command read the default SQLite file
    # in the working folder without a word
    for blank in ("", "  "):
        done = _cli("trials", env={"AUTOTUNE_STORAGE": blank}, cwd=tmp_path)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
        assert "$AUTOTUNE_STORAGE is set but blank" in done.stderr
    given = _cli("trials", "--storage", "memory", env={"AUTOTUNE_STORAGE": ""}, cwd=tmp_path)
    assert "holds no study" in given.stderr  # --storage given: the variable is not read
    assert not (tmp_path / "autotune.db").exists()


def test_a_recordings_header_line_keeps_the_commands_secrets_out(tmp_path) -> None:
    # `autotune record` printed its problem as given ("recording server {'command': '... --api-key
    # SEKRET5555 ...'}") on stderr, where the CSV it wrote and a sweep's header left them out
    (tmp_path / "echo.py").write_text(ECHO)
    (tmp_path / "s.yaml").write_text("workload: server\nparameters:\n"
                                     "  max_num_seqs: {type: pow2, low: 4, high: 4}\n")  # fmt: skip
    command = (f"command={sys.executable} echo.py --port {{port}} -n {{max_num_seqs}} "
               "--api-key SEKRET5555 --db postgresql://u:SEKRET6666@h/db")  # fmt: skip
    done = _cli("record", "server", "--space", "s.yaml", "--problem", command, "--output",
                "r.csv", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0 and "--api-key ***" in done.stderr, done.stderr
    assert "postgresql://u:***@h/db" in done.stderr
    for text in (done.stdout, done.stderr, (tmp_path / "r.csv").read_text()):
        assert "SEKRET" not in text


def test_a_metric_per_token_is_no_secret(tmp_path) -> None:
    # `--slo energy_j_per_token=1.5` (a serving metric) read as an assignment of a token: the
    # stored command line, its export and report showed energy_j_per_token=***, and a refusal
    # of the limit hid the limit it refused; a name that only ends so (SUPER_TOKEN) is one
    assert redact("--slo energy_j_per_token=1.5,kv_bytes_per_token=64") == (
        "--slo energy_j_per_token=1.5,kv_bytes_per_token=64"
    )
    assert redact("env HF_TOKEN=x1 SUPER_TOKEN=x2 srv") == "env HF_TOKEN=*** SUPER_TOKEN=*** srv"
    table = tmp_path / "t.csv"
    table.write_text("BM,tflops,energy_j_per_token\n16,1.0,0.5\n32,2.0,2.5\n64,3.0,1.0\n")
    replay = ["--replay", str(table), "--params", "BM", "--metric", "tflops"]
    url = f"sqlite:///{tmp_path / 'e.db'}"
    done = _cli("tune", *replay, "--slo", "energy_j_per_token=1.5", "--trials", "3", "--storage",
                url, "--study", "e", "--executor", "inline", "--finish-top", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    export = json.loads(_cli("export", "--storage", url, "--to", "json").stdout)
    assert "--slo energy_j_per_token=1.5 " in export["command"]
    refused = _cli("tune", *replay, "--slo", "energy_j_per_token=lots", "--storage", "memory")
    assert refused.returncode == 2
    assert "--slo: 'energy_j_per_token=lots' is not METRIC=LIMIT" in refused.stderr
