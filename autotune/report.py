"""``autotune report``: one self-contained HTML file per study (plotly.js inlined, nothing fetched
when it is opened) that explains a sweep.

Sections: the winner (its finish medians and spread, the runners-up within noise, the untuned
default, whether the library kernel it was timed against is still faster, the device and
software, throttle reasons, the command that reproduces it with secrets redacted); the
optimization history against the expected best of random search over the same measured
configs; parameter importances (Optuna's PED-ANOVA); parallel coordinates; the metric sliced by
each parameter; failures by state and by parameter value; the Pareto front
of a study of several objectives; for matmul studies the roofline position of every trial
against the ceilings measured in the same sweep (the cuBLAS reference's TFLOP/s, a device copy's
GB/s).

Every figure is a ``<div class="autotune-figure" data-figure=NAME>``; the numbers the page
shows are also in ``<script id="autotune-data" type="application/json">`` so that a test can
compare what the browser rendered with the study.

Example:
    >>> import optuna
    >>> study = optuna.create_study(direction="maximize")
    >>> study.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=5)
    >>> html = report_html(study)
    >>> html.startswith("<!DOCTYPE html>") and 'data-figure="history"' in html
    True
"""

from __future__ import annotations

import html
import json
import math
import warnings
from typing import Any

import optuna

from autotune.driver.results import measured_trials, shown_status
from autotune.driver.trial_attrs import (
    is_repeat,
    stored_info,
    trial_metrics,
)
from autotune.problem_text import problem_text
from autotune.replay_info import study_label
from autotune.report_winner import winner_panel
from autotune.units import readable

#: the most panels (one parameter each) a figure draws
MOST_PANELS = 30


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
        import plotly.offline
    except ImportError as exc:
        raise ImportError("autotune report needs plotly: pip install 'autotune[report]'") from exc
    return go, plotly.offline


def unit_label(metric: str) -> str:
    """An axis title: the metric and its unit, e.g. ``tokens_per_s (tokens/s)``."""
    text = readable(metric, 1.0)
    unit = text.split(" ", 1)[1] if " " in text else ("x" if text.endswith("x") else "")
    return f"{metric} ({unit})" if unit else metric


def random_search_expectation(values: list[float], maximize: bool) -> list[float]:
    """Expected best of n configs drawn at random without replacement from ``values`` (the
    measured ones), for n = 1 .. len(values).

    Example:
        >>> random_search_expectation([1.0, 2.0, 3.0], maximize=True)
        [2.0, 2.6666666666666665, 3.0]
    """
    ordered = sorted(values, reverse=not maximize)  # worst first
    total = len(ordered)
    expected = []
    for n in range(1, total + 1):
        # P(best of n is the k-th worst) = C(k-1, n-1) / C(total, n), k = n .. total
        denominator = math.comb(total, n)
        expected.append(
            sum(ordered[k - 1] * math.comb(k - 1, n - 1) for k in range(n, total + 1)) / denominator
        )
    return expected


def _spans_decades(values: list[float]) -> bool:
    positive = [v for v in values if v > 0]
    return bool(positive) and len(positive) == len(values) and max(positive) / min(positive) > 30


class Report:
    """The figures and panels of one study's report."""

    def __init__(self, study: optuna.Study) -> None:
        self.study = study
        self.info: dict[str, Any] = stored_info(study.user_attrs)
        objectives = self.info.get("objectives")
        if not objectives:  # a study autotune did not write: Optuna's own names and directions
            names = study.metric_names or [
                f"value {i}" if len(study.directions) > 1 else "value"
                for i in range(len(study.directions))
            ]
            objectives = {n: d.name.lower() for n, d in zip(names, study.directions, strict=True)}
        self.metrics = list(objectives)
        self.directions = [objectives[m] for m in self.metrics]
        self.metric = self.metrics[0]
        self.maximize = self.directions[0] == "maximize"
        self.trials = measured_trials(study)
        self.go, self.offline = _plotly()
        self.data: dict[str, Any] = {"study": study.study_name, "metric": self.metric}

    # -- figures ---------------------------------------------------------------------------
    def history(self) -> Any:
        go = self.go
        numbers = [t.number for t in self.trials]
        values = [t.values[0] for t in self.trials]
        best, running = [], None
        for v in values:
            running = (
                v if running is None else (max(running, v) if self.maximize else min(running, v))
            )
            best.append(running)
        expected = random_search_expectation(values, self.maximize)
        fig = go.Figure()
        fig.add_scatter(x=numbers, y=values, mode="markers", name="trial")
        fig.add_scatter(x=numbers, y=best, mode="lines", name="best so far")
        fig.add_scatter(
            x=numbers,
            y=expected,
            mode="lines",
            line={"dash": "dot"},
            name="random search, expected best (same measured configs)",
        )
        fig.update_layout(
            title="Optimization history", xaxis_title="trial", yaxis_title=unit_label(self.metric)
        )
        if _spans_decades(values):
            fig.update_yaxes(type="log")
        self.data["best_value"] = best[-1] if best else None
        self.data["measured_trials"] = len(values)
        return fig

    def importances(self) -> Any | None:
        go = self.go
        try:
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            sign = -1.0 if self.maximize else 1.0  # PED-ANOVA ranks for low targets
            with warnings.catch_warnings():  # its reminder of that: the sign above takes care
                warnings.filterwarnings("ignore", "PedAnovaImportanceEvaluator computes")
                # with too few trials it warns and returns nothing: the section is left out
                warnings.filterwarnings("ignore", "The number of trials is too small")
                # a parameter value seen in fewer than 2 trials: its score is still drawn
                warnings.filterwarnings("ignore", "Some regimes for parameter")
                # every measured value equal (or too few to part): the importances are equal,
                # and the figure shows that
                warnings.filterwarnings("ignore", "Target and region quantiles select the same")
                scores = optuna.importance.get_param_importances(
                    self.study, evaluator=evaluator, target=lambda t: sign * t.values[0]
                )
        except Exception:  # noqa: BLE001 - too few trials, a single value, ...
            return None
        names = list(scores)[::-1]
        fig = go.Figure(go.Bar(x=[scores[n] for n in names], y=names, orientation="h"))
        fig.update_layout(
            title="Parameter importances (PED-ANOVA)",
            xaxis_title="importance",
            yaxis_title="parameter",
        )
        self.data["importances"] = scores
        return fig

    def _params(self) -> list[str]:
        return self._params_of(self.trials)

    def _panels(self, params: list[str]) -> tuple[list[str], str]:
        """The parameters a figure of one panel (or axis) each draws: all of them up to
        :data:`MOST_PANELS`, else that many, the most important first where the importances
        are known (each panel costs plotly about 50 ms: 2,000 took 3 minutes), and the
        title's note saying so.

        Example:
            >>> import optuna
            >>> report = Report(optuna.create_study())
            >>> report._panels(["a", "b"])
            (['a', 'b'], '')
            >>> chosen, note = report._panels([f"p{i}" for i in range(100)])
            >>> len(chosen), note
            (30, " (30 of 100 parameters, in the space's order)")
        """
        if len(params) <= MOST_PANELS:
            return params, ""
        scores = self.data.get("importances") or {}
        if scores:
            ranked = sorted(params, key=lambda p: -scores.get(p, 0.0))[:MOST_PANELS]
            return ranked, f" ({MOST_PANELS} of {len(params)} parameters, the most important)"
        in_order = f" ({MOST_PANELS} of {len(params)} parameters, in the space's order)"
        return params[:MOST_PANELS], in_order

    def parallel(self) -> Any | None:
        go = self.go
        params, note = self._panels(self._params())
        if not params or len(self.trials) < 2:
            return None
        dims = []
        for name in params:
            raw = [t.params.get(name) for t in self.trials]
            if all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw):
                dims.append({"label": name, "values": raw})
            else:
                levels = sorted({str(v) for v in raw})
                dims.append(
                    {
                        "label": name,
                        "values": [levels.index(str(v)) for v in raw],
                        "tickvals": list(range(len(levels))),
                        "ticktext": levels,
                    }
                )
        values = [t.values[0] for t in self.trials]
        dims.append({"label": unit_label(self.metric), "values": values})
        fig = go.Figure(go.Parcoords(line={"color": values, "showscale": True}, dimensions=dims))
        fig.update_layout(title=f"Parallel coordinates (colour: {unit_label(self.metric)}){note}")
        return fig

    def slices(self) -> Any | None:
        from plotly.subplots import make_subplots

        params, note = self._panels(self._params())
        if not params:
            return None
        cols = min(3, len(params))
        rows = -(-len(params) // cols)
        fig = make_subplots(rows=rows, cols=cols, subplot_titles=params)
        for i, name in enumerate(params):
            xs = [t.params.get(name) for t in self.trials if name in t.params]
            ys = [t.values[0] for t in self.trials if name in t.params]
            xs = [str(x) if isinstance(x, bool) else x for x in xs]
            fig.add_scatter(
                x=xs,
                y=ys,
                mode="markers",
                name=name,
                showlegend=False,
                row=i // cols + 1,
                col=i % cols + 1,
            )
            fig.update_yaxes(
                title_text=unit_label(self.metric), row=i // cols + 1, col=i % cols + 1
            )
            fig.update_xaxes(title_text=name, row=i // cols + 1, col=i % cols + 1)
        fig.update_layout(title="The metric by each parameter" + note, height=320 * rows)
        return fig

    def failures(self) -> Any | None:
        from plotly.subplots import make_subplots

        launched = [t for t in self.study.trials if not is_repeat(t)]
        states: dict[str, int] = {}
        for t in launched:
            states[shown_status(t)] = states.get(shown_status(t), 0) + 1
        self.data["statuses"] = states
        params, note = self._panels([
            p
            for p in self._params_of(launched)
            if len({str(t.params.get(p)) for t in launched}) <= 16
        ])  # fmt: skip
        cols = 1 + min(2, len(params))
        fig = make_subplots(
            rows=1 + len(params) // 3, cols=cols, subplot_titles=["trials by state"] + params
        )
        fig.add_bar(
            x=list(states), y=list(states.values()), name="trials", showlegend=False, row=1, col=1
        )
        for i, name in enumerate(params, start=1):
            row, col = i // cols + 1, i % cols + 1
            values = sorted({str(t.params.get(name)) for t in launched})
            for status in sorted(states):
                counts = [
                    sum(
                        1
                        for t in launched
                        if str(t.params.get(name)) == v and shown_status(t) == status
                    )
                    for v in values
                ]
                fig.add_bar(
                    x=values,
                    y=counts,
                    name=status,
                    legendgroup=status,
                    showlegend=i == 1,
                    row=row,
                    col=col,
                )
            fig.update_xaxes(title_text=name, row=row, col=col)
            fig.update_yaxes(title_text="trials", row=row, col=col)
        fig.update_layout(
            title="Trials by state, and by parameter value" + note,
            barmode="stack",
            height=340 * (1 + len(params) // 3),
        )
        return fig

    @staticmethod
    def _params_of(trials: list[optuna.trial.FrozenTrial]) -> list[str]:
        names: list[str] = []
        for t in trials:
            names += [p for p in t.params if p not in names]
        return names

    def pareto(self) -> Any | None:
        if len(self.metrics) < 2:
            return None
        go = self.go
        front = {t.number for t in self.study.best_trials}
        xs = [t.values[0] for t in self.trials]
        ys = [t.values[1] for t in self.trials]
        on = [t.number in front for t in self.trials]
        fig = go.Figure()
        fig.add_scatter(
            x=[x for x, o in zip(xs, on, strict=True) if not o],
            y=[y for y, o in zip(ys, on, strict=True) if not o],
            mode="markers",
            name="dominated",
        )
        fig.add_scatter(
            x=[x for x, o in zip(xs, on, strict=True) if o],
            y=[y for y, o in zip(ys, on, strict=True) if o],
            mode="markers",
            marker={"size": 11},
            name="Pareto front",
        )
        fig.update_layout(
            title="Pareto front",
            xaxis_title=unit_label(self.metrics[0]),
            yaxis_title=unit_label(self.metrics[1]),
        )
        return fig

    def roofline(self) -> Any | None:
        """Matmul studies: each trial's achieved TFLOP/s against its arithmetic intensity,
        with the compute ceiling (the best cuBLAS reading) and the bandwidth ceiling (a copy of
        B, where the sweep timed one) measured in the sweep."""
        p = self.info.get("problem", {})
        if self.info.get("workload") != "matmul" or not {"M", "N", "K"} <= set(p):
            return None
        go = self.go
        m, n, k = int(p["M"]), int(p["N"]), int(p["K"])
        size = 1 if p.get("dtype") == "fp8" else 2
        intensity = 2 * m * n * k / ((m * k + k * n + m * n) * size)
        achieved, compute, bandwidth = [], [], []
        for t in self.trials:
            metrics = trial_metrics(t)
            if metrics.get("ms"):
                achieved.append(2 * m * n * k / (metrics["ms"] * 1e-3) / 1e12)
            if metrics.get("cublas_tflops"):
                compute.append(metrics["cublas_tflops"])
            if metrics.get("copy_ms"):
                bandwidth.append(2 * k * n * size / (metrics["copy_ms"] * 1e-3) / 1e12)  # TB/s
        if not achieved:
            return None
        fig = go.Figure()
        fig.add_scatter(
            x=[intensity] * len(achieved), y=achieved, mode="markers", name="trials (this shape)"
        )
        xs = [max(0.5, intensity / 100), intensity * 100]
        if compute:
            name = f"compute ceiling: cuBLAS, {readable('tflops', max(compute))}"
            fig.add_scatter(x=xs, y=[max(compute)] * 2, mode="lines", name=name)
        if bandwidth:
            bw = max(bandwidth)
            fig.add_scatter(
                x=xs,
                y=[x * bw for x in xs],
                mode="lines",
                name=f"bandwidth ceiling: copy, {readable('tb_per_s', bw)}",
            )
        fig.update_layout(
            title="Roofline (ceilings measured in this sweep)",
            xaxis_title="arithmetic intensity (FLOP/byte)",
            yaxis_title="achieved (TFLOP/s)",
        )
        fig.update_xaxes(type="log")
        fig.update_yaxes(type="log")
        return fig

    # -- panels ----------------------------------------------------------------------------
    def winner_panel(self) -> str:
        panel, data = winner_panel(self.study, self.info, self.trials, self.metrics, self.maximize)
        self.data.update(data)
        return panel

    # -- the page --------------------------------------------------------------------------
    def html(self) -> str:
        builders = [
            ("history", self.history),
            ("importances", self.importances),
            ("parallel", self.parallel),
            ("slices", self.slices),
            ("failures", self.failures),
            ("pareto", self.pareto),
            ("roofline", self.roofline),
        ]
        blocks, shown = [], []
        for name, build in builders:
            fig = build() if self.trials or name == "failures" else None
            if fig is None:
                continue
            fig.update_layout(template="plotly_white")
            div = self.offline.plot(
                fig, output_type="div", include_plotlyjs=False, config={"displaylogo": False}
            )
            blocks.append(f'<section class="autotune-figure" data-figure="{name}">{div}</section>')
            shown.append(name)
        self.data["figures"] = shown
        problem = problem_text(self.info.get("problem") or {})
        head = f"{self.info.get('workload', '?')} {problem}".rstrip()
        label = study_label(self.study)  # (an old replay's completed with its device)
        return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8">
<title>autotune report: {html.escape(self.study.study_name)}</title>
<script>{self.offline.get_plotlyjs()}</script>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px}} .label{{color:#a60}}</style></head>
<body>
<h1>autotune report: study {html.escape(self.study.study_name)}</h1>
<p>{html.escape(head)}</p>
<p class="label">{html.escape(label)}</p>
{self.winner_panel()}
{"".join(blocks)}
<script id="autotune-data" type="application/json">{_script_json(self.data)}</script>
</body></html>
"""


def _script_json(data: dict[str, Any]) -> str:
    """JSON safe inside a <script> element: no ``<`` (``</script>`` would close it early,
    ``<!--`` open a comment that swallows the close), and no ``NaN`` or ``Infinity``, which
    ``JSON.parse`` refuses (``null`` stands for them).

    Example:
        >>> _script_json({"study": "<!--<script>", "best": float("inf")})
        '{"study": "\\\\u003c!--\\\\u003cscript>", "best": null}'
    """
    return json.dumps(_finite(data), default=str).replace("<", "\\u003c")


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite (nested too) as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def report_html(study: optuna.Study) -> str:
    """The self-contained HTML report of ``study``."""
    return Report(study).html()
