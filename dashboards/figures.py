"""Plotly figures from report rows (the plain dicts `dashboards.spark.jobs.run_reports` returns).

Pure: rows in, `plotly.graph_objects.Figure` out; no Spark, no Django. Views embed `fig.to_json()`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, timedelta

import plotly.graph_objects as go

from dashboards.spark.lake import topic_row_task

Row = Mapping[str, object]
STATUS_LEVELS = ("OK", "WARN", "REWIND", "STALL", "STOP")  # heatmap z = index: worse is higher
STATUS_COLOURS = ("#2ca02c", "#ffbf00", "#9467bd", "#ff7f0e", "#d62728")
VERDICT_COLOURS = {
    "UNDER_PROVISIONED": "#d62728",
    "RIGHT_SIZED": "#2ca02c",
    "OVER_PROVISIONED": "#1f77b4",
    "NOT_ENOUGH_DATA": "#7f7f7f",
}


def _partition_label(row: Row) -> str:
    """`A->B orders[3]`; a topic row (`dashboards.spark.lake`): `A->B orders[task 0: 600 partitions]`."""
    task = topic_row_task(row["partition"])
    shown = row["partition"] if task is None else f"task {task}: {row.get('partitions')} partitions"
    return f"{row['flow_name']} {row['remote_topic']}[{shown}]"


def _series(rows: Iterable[Row], *, label, x: str, y: str) -> dict[str, tuple[list, list]]:
    """Group rows into (x, y) lists per label, sorted by x."""
    grouped: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        grouped[label(row)].append((row[x], row[y]))
    return {
        name: tuple(map(list, zip(*sorted(points), strict=True))) for name, points in sorted(grouped.items())
    }


def _lines(series: dict[str, tuple[list, list]], *, title: str, y_title: str) -> go.Figure:
    figure = go.Figure([go.Scatter(x=xs, y=ys, name=name, mode="lines") for name, (xs, ys) in series.items()])
    figure.update_layout(title=title, xaxis_title="time (UTC)", yaxis_title=y_title, hovermode="x unified")
    return figure


def lag_figure(rows: Iterable[Row], *, measure: str = "records") -> go.Figure:
    """Lag over time per flow and partition (`partition_lag` rows); measure "records" or "seconds"."""
    if measure not in ("records", "seconds"):
        raise ValueError("lag is measured in records or seconds")
    series = _series(rows, label=_partition_label, x="window_start", y=f"{measure}_behind_max")
    return _lines(
        series, title=f"Replication lag ({measure} behind, window max)", y_title=f"{measure} behind"
    )


def throughput_figure(rows: Iterable[Row], *, unit: str = "mb") -> go.Figure:
    """Throughput per flow over time (`flow_throughput` rows summed over partitions): MB/s or records/s."""
    column = {"mb": "mb_per_s", "records": "records_per_s"}[unit]
    totals: dict[tuple, float] = defaultdict(float)
    for row in rows:
        totals[(row["flow_name"], row["window_start"])] += row[column]
    series = _series(
        (
            {"flow_name": flow, "window_start": start, column: value}
            for (flow, start), value in totals.items()
        ),
        label=lambda row: str(row["flow_name"]),
        x="window_start",
        y=column,
    )
    y_title = "MB/s" if unit == "mb" else "records/s"
    return _lines(series, title=f"Throughput ({y_title})", y_title=y_title)


def latency_figure(rows: Iterable[Row], *, measure: str = "replication_latency_ms") -> go.Figure:
    """p50/p95/p99/max of a latency measure over time, worst partition per window (`latency_percentiles`)."""
    worst: dict[tuple, dict[str, float]] = {}
    for row in rows:
        key = (row["flow_name"], row["window_start"])
        current = worst.setdefault(key, {})
        for stat in ("p50", "p95", "p99", "max"):
            value = row[f"{measure}_{stat}"]
            if value is not None:
                current[stat] = max(current.get(stat, value), value)
    figure = go.Figure()
    for flow in sorted({flow for flow, _ in worst}):
        times = sorted(start for f, start in worst if f == flow)
        for stat in ("p50", "p95", "p99", "max"):
            figure.add_trace(
                go.Scatter(
                    x=times,
                    y=[worst[(flow, t)].get(stat) for t in times],
                    name=f"{flow} {stat}",
                    mode="lines",
                )
            )
    figure.update_layout(
        title=f"{measure.replace('_', ' ')} percentiles", xaxis_title="time (UTC)", yaxis_title="ms"
    )
    return figure


def status_heatmap(rows: Iterable[Row]) -> go.Figure:
    """Partition x time, coloured by Burrow status (`partition_status` rows)."""
    rows = list(rows)
    partitions = sorted({_partition_label(r) for r in rows})
    times = sorted({r["window_start"] for r in rows})
    cell = {(_partition_label(r), r["window_start"]): r["status"] for r in rows}
    z = [[_status_level(cell.get((p, t))) for t in times] for p in partitions]
    text = [[cell.get((p, t), "") for t in times] for p in partitions]
    top = len(STATUS_LEVELS) - 1
    figure = go.Figure(
        go.Heatmap(
            x=times,
            y=partitions,
            z=z,
            text=text,
            zmin=0,
            zmax=top,
            colorscale=_discrete_scale(),
            hovertemplate="%{y}<br>%{x}<br>%{text}<extra></extra>",
            colorbar={"tickvals": list(range(len(STATUS_LEVELS))), "ticktext": list(STATUS_LEVELS)},
        )
    )
    figure.update_layout(title="Partition status (Burrow)", xaxis_title="time (UTC)", yaxis_title="partition")
    return figure


def _status_level(status: object) -> int | None:
    return STATUS_LEVELS.index(status) if status in STATUS_LEVELS else None


def _discrete_scale() -> list[list]:
    """A colour band per status level, for z in [0, levels - 1]."""
    bands = len(STATUS_LEVELS)
    scale = []
    for level, colour in enumerate(STATUS_COLOURS):
        scale += [[level / bands, colour], [(level + 1) / bands, colour]]
    return scale


def _day(value: object) -> date:
    """A plan or usage row's date: a `date`, or its ISO text as rows stored as JSON give it."""
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def capacity_headline(row: Row, *, newline: str = "<br>") -> str:
    """One plan row (horizon 0) in short lines (they fit a phone): the verdict and load, tasks and
    workers, and when the load reaches capacity x threshold."""
    verdict = row["verdict"]
    load = f"{row['projected_mb_per_s']:.3g} MB/s"
    if verdict == "NOT_ENOUGH_DATA":
        if row.get("tasks_needed") is not None:  # sized, but the pool's live workers are not known
            return newline.join([f"not enough data: {load}", "live workers unknown (Redis did not answer)"])
        lines = [
            f"not enough data: {load}",
            "no task saturated a whole window,",
            "no measured per-task maximum",
        ]
        return newline.join(lines)
    lines = [f"{verdict}: {load} of {row['capacity_mb_per_s']:.3g} MB/s capacity"]
    if verdict == "UNDER_PROVISIONED" and row.get("scope") == "flow" and row.get("saturated_windows"):
        lines.append(f"saturated: a task could not keep up in {row['saturated_windows']} window(s)")
    sizing = f"{row['tasks']} task(s) (needs {row['tasks_needed']})"
    if row.get("scope") in ("overall", "pool"):  # judged on workers
        sizing += f", {row['workers']} worker(s) (needs {row['workers_needed']})"
    lines.append(sizing)
    days = row.get("days_to_capacity")
    if days is None:
        lines.append("not growing: no run-out date")
    elif days == 0:
        lines.append(f"above capacity x {row['threshold']:g} now")
    else:
        lines.append(
            f"at capacity x {row['threshold']:g} in {days:.0f} days ({row.get('fit_confidence')} confidence)"
        )
    return newline.join(lines)


def capacity_figure(
    plan_rows: Sequence[Row], usage_rows: Sequence[Row] = (), *, flow: str = "overall"
) -> go.Figure:
    """Measured daily load, projected load at each horizon and capacity x threshold on one date axis,
    with the verdict and the day the load reaches capacity x threshold. `flow` names a plan scope: a
    flow, a pool ("pool payments": its flows' load) or "overall" (every flow's)."""
    plan = sorted((r for r in plan_rows if r["flow_name"] == flow), key=lambda r: r["horizon_days"])
    if not plan:
        raise ValueError(f"no capacity plan for {flow!r}")
    now = plan[0]
    if now.get("scope") == "pool":
        members = {
            r["flow_id"] for r in plan_rows if r.get("scope") == "flow" and r.get("pool") == now["pool"]
        }
        history = [r for r in usage_rows if r["flow_id"] in members]
    else:
        history = [r for r in usage_rows if r["flow_name"] == flow or flow == "overall"]
    daily: dict[date, float] = defaultdict(float)
    for row in history:
        daily[_day(row["date"])] += row["p95_mb_per_s"]
    as_of = _day(now["newest_date"]) if now.get("newest_date") else max(daily, default=date.today())
    ahead = [as_of + timedelta(days=r["horizon_days"]) for r in plan]
    figure = go.Figure()
    days = sorted(daily)
    figure.add_trace(
        go.Scatter(x=days, y=[daily[d] for d in days], name="measured (daily p95)", mode="lines+markers")
    )
    figure.add_trace(
        go.Scatter(
            x=ahead,
            y=[r["projected_mb_per_s"] for r in plan],
            name="projected",
            mode="lines+markers",
            line={"dash": "dot"},
            text=[f"+{r['horizon_days']} d" for r in plan],
        )
    )
    limit = [
        None if r["capacity_mb_per_s"] is None else r["capacity_mb_per_s"] * r["threshold"] for r in plan
    ]
    span = [*days, *ahead]
    if limit[0] is not None:
        figure.add_trace(
            go.Scatter(
                x=[min(span), max(span)],
                y=[limit[0], limit[0]],
                name=f"capacity x threshold ({now['threshold']:g})",
                mode="lines",
                line={"dash": "dash"},
            )
        )
    runs_out = now.get("runs_out_on")
    if runs_out is not None:
        figure.add_trace(
            go.Scatter(
                x=[_day(runs_out)],
                y=[limit[0]],
                name="runs out",
                mode="markers",
                marker={"symbol": "x", "size": 12, "color": VERDICT_COLOURS["UNDER_PROVISIONED"]},
            )
        )
        span.append(_day(runs_out))
    verdict = now["verdict"]
    figure.add_annotation(
        text=capacity_headline(now),
        xref="paper",
        yref="paper",
        x=0,
        y=1.02,
        xanchor="left",
        yanchor="bottom",
        align="left",
        showarrow=False,
        font={"color": VERDICT_COLOURS.get(verdict, "#7f7f7f"), "size": 11},
    )
    # Whole days, a day of margin each side: one measured day alone would span a millisecond.
    first, last = min(span) - timedelta(days=1), max(span) + timedelta(days=1)
    figure.update_layout(
        title=f"Capacity plan: {flow}",
        xaxis={"type": "date", "range": [first.isoformat(), last.isoformat()]},  # UTC days
        yaxis={"title": "MB/s", "rangemode": "tozero"},
        margin={"t": 130, "l": 56, "r": 24, "b": 40},
        legend={"orientation": "h", "y": -0.12, "yanchor": "top"},
    )
    return figure
