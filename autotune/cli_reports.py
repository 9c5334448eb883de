"""The commands that explain sweeps: ``autotune report`` (one self-contained HTML file, or
served live) and ``autotune compare``; :func:`register` adds them to the CLI's app.

Example (a shell):
    autotune report --study mm-4096 --output report.html
    autotune compare mm-h100 mm-h200
"""

# no ``from __future__ import annotations``: typer reads the options' annotations, which name
# types imported inside register()
import sys
from pathlib import Path
from typing import Annotated

import typer

from autotune.cli_parsing import UsageError, writable_output


def register(app: typer.Typer) -> None:
    """Add ``report`` and ``compare`` to ``app`` (the CLI's, as it runs)."""
    from autotune.cli_errors import err, one_line_errors
    from autotune.cli_options import (
        DEFAULT_STORAGE,
        StorageOption,
        StudyOption,
        output_file,
        quiet_libraries,
    )
    from autotune.cli_stdout import say_written

    @app.command()
    @one_line_errors
    def report(
        storage: StorageOption = DEFAULT_STORAGE,
        study: StudyOption = None,
        output: Annotated[
            Path | None,
            typer.Option(parser=output_file, help="The HTML file to write (default: report.html)."),
        ] = None,
        serve: Annotated[
            int | None,
            typer.Option(
                min=1, max=65535, help="Serve the report live on this port (rebuilt live)."
            ),
        ] = None,
    ) -> None:
        """Write a sweep's self-contained HTML report (plotly inlined: it opens offline)."""
        quiet_libraries()
        from autotune.export import write_atomic
        from autotune.report import report_html
        from autotune.storage import load_study, open_storage

        try:
            import plotly  # noqa: F401
        except ImportError:
            raise UsageError(
                "autotune report needs plotly: pip install 'autotune[report]'"
            ) from None
        if serve is not None and output is not None:  # it was never written
            raise UsageError("--output applies without --serve (a served report is rebuilt "
                             "live, not written)")  # fmt: skip
        if serve is None:
            output = writable_output(output or Path("report.html"), storage=storage,
                                     studies=[study])  # fmt: skip
        opened = open_storage(storage, existing=True)
        if serve is None:
            assert output is not None
            write_atomic(output, report_html(load_study(opened, study)))
            say_written(output)
            return
        from autotune.report_server import serve_report

        def ready() -> None:
            err.print(f"serving the report of {study or 'the latest study'} on "
                      f"http://127.0.0.1:{serve}/ (refreshes every 10 s; Ctrl-C ends)")  # fmt: skip

        serve_report(lambda: report_html(load_study(opened, study)), serve, on_ready=ready)

    @app.command()
    @one_line_errors
    def compare(
        studies: Annotated[list[str], typer.Argument(help="Two or more stored studies.")],
        storage: StorageOption = DEFAULT_STORAGE,
        output: Annotated[
            Path | None, typer.Option(parser=output_file, help="An HTML file (else text).")
        ] = None,
    ) -> None:
        """Sweeps side by side: winners, how their configs differ, each winner elsewhere."""
        quiet_libraries()
        from autotune.compare import compare_html, compare_studies, compare_text
        from autotune.export import write_atomic
        from autotune.storage import load_study, open_storage

        if len(studies) < 2:
            raise UsageError("compare needs two or more studies")
        twice = next((name for name in studies if studies.count(name) > 1), None)
        if twice is not None:
            raise UsageError(f"compare: study {twice!r} is named twice")
        writable_output(output, storage=storage, studies=studies)
        opened = open_storage(storage, existing=True)
        rows = compare_studies([load_study(opened, name) for name in studies])
        if output is None:
            sys.stdout.write(compare_text(rows))
        else:
            write_atomic(output, compare_html(rows))
            say_written(output)
