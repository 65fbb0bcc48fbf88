"""Template helpers: role checks for showing actions, times with their zone, human numbers."""

from __future__ import annotations

import html
from datetime import datetime

from django import template
from django.template.defaultfilters import floatformat, urlencode
from django.urls import get_script_prefix, get_urlconf
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.safestring import mark_safe

from controlplane.core.roles import Role
from controlplane.flows import lifecycle
from controlplane.web import numbers
from controlplane.web.summaries import FieldChange, audit_changes
from controlplane.web.templatetags.cached_urls import reversed_url
from controlplane.web.waits import FORM_WAITS

register = template.Library()


@register.filter
def at_least(role: Role | None, name: str) -> bool:
    """`{% if request.web_role|at_least:"operator" %}`: whether to show an action (the view enforces it)."""
    return role is not None and role >= Role.from_name(name)


def row_url(name: str, *args) -> str:
    """A URL for the tags that write rows in Python (`flow_rows`, `partition_rows`), as `{% url %}` gives it
    in a template: remembered per name, arguments, URLconf and script prefix (`reversed_url`, cached_urls).
    Django's `reverse` costs 15-60 µs; a page of 50 flows asked it 100 times per request."""
    return reversed_url(get_script_prefix(), get_urlconf(), name, args, (), None)  # as `{% url %}` asks it


@register.simple_tag
def flow_state(live) -> str:
    """`{% flow_state summary %}`: the flow's state in a badge of its health's colour, then its health's own
    badge when that says more than the state (the one health rule: docs/lag.md). A tag, not an included
    template: it is in every row of the flows table."""
    health, state = _text(live.health), _text(live.flow.state)
    shown = f'<span class="badge {health}">{state}</span>'
    if live.health in ("ok", live.flow.state):
        return mark_safe(shown)
    return mark_safe(
        f'{shown} <span class="badge {health}" title="the one health rule: docs/lag.md">'
        f"{_text(live.health_label)}</span>"
    )


@register.simple_tag
def pause_resume(flow) -> str:
    """`{% pause_resume flow %}`: the Resume… or Pause… button the flow's state allows, which opens the page's
    one confirmation dialog (web/_pause_resume_dialogs.html) and fills it from its data attributes. A tag:
    it is in every row of the flows table (an included template cost about 30 µs a row)."""
    actions = lifecycle.allowed_actions(flow.state)
    action = next((action for action in ("resume", "pause") if action in actions), None)
    if action is None:
        return ""
    # The pause dialog names the source cluster (its producers are not affected).
    source = f' data-source="{_text(flow.source.alias)}"' if action == "pause" else ""
    return mark_safe(
        f'<button type="button" class="small" data-opens="{action}-flow" '
        f'data-action="{_text(row_url(f"web:flow-{action}", flow.pk))}" data-flow="{_text(flow.name)}"{source}>'
        f"{action.capitalize()}…</button>"
    )


@register.simple_tag
def filter_options(choices, chosen: str) -> str:
    """`{% filter_options flt.choices chosen %}`: a list filter's options (value, label), the chosen one
    selected. A tag, not a loop in the template: a filter by cluster lists every cluster, and the
    template language resolved four variables and a comparison an option."""
    return mark_safe(
        "".join(
            f'<option value="{_text(value)}"{" selected" if value == chosen else ""}>{_text(text)}</option>'
            for value, text in choices
        )
    )


@register.simple_tag
def flow_rows(summaries, firing, can_act: bool) -> str:
    """`{% flow_rows summaries firing can_act %}`: the flows table's rows, one per flow summary, with its
    firing alerts' marker (`firing`: flow id -> its alerts) and, when `can_act`, its pause or resume button.
    A tag, not a loop in the template: the template language resolved about twenty variables and filters a
    row, most of the table's cost (about 4 ms for 50 rows). The rows are not localized (ids and counts)."""
    alerts_url = row_url("web:alerts")
    return mark_safe("".join(_flow_row(live, firing, can_act, alerts_url) for live in summaries))


def _text(value: str | int) -> str:
    """`{{ value }}` inside `{% localize off %}` for a text or an integer (neither localized there): escaped
    as Django escapes, by the same `html.escape`, without its checks for lazy and safe text (about a third
    of a flows table's cost: each row shows about twenty values)."""
    return html.escape(str(value))


def _flow_row(live, firing, can_act: bool, alerts_url: str) -> str:
    flow = live.flow
    flow_alerts = firing.get(flow.pk) if firing else None
    marker = (
        f' <a class="badge error alert-marker" href="{_text(alerts_url)}" '
        f'title="{_text("; ".join(str(alert.get_rule_display()) for alert in flow_alerts))}">'
        f"🔔 {len(flow_alerts)} alert{'' if len(flow_alerts) == 1 else 's'} firing</a>"
        if flow_alerts
        else ""
    )
    action = f"<td>{pause_resume(flow)}</td>" if can_act else ""
    return (
        f'\n  <tr data-rate-key="flow-{_text(flow.pk)}" data-rate-count="{_text(live.position)}" '
        f'data-rate-at="{_text(epoch(live.observed_at))}">'
        f'\n    <th scope="row"><a href="{_text(row_url("web:flow", flow.pk))}">{_text(flow.name)}</a>{marker}</th>'
        f"\n    <td>{flow_state(live)}</td>"
        f"\n    <td>{_text(live.partition_count)}</td>"
        f'\n    <td class="num records-behind">{_text(numbers.count(live.records_behind))}</td>'
        f'\n    <td class="num">{_text(numbers.seconds(live.seconds_behind))}</td>'
        '\n    <td class="num"><span class="js-rate" title="records per second, measured between refreshes">'
        "—</span></td>"
        f"\n    <td>{observed(live)}</td>"
        f"\n    {action}\n  </tr>\n  "
    )


@register.simple_tag
def partition_rows(partitions, flow, stall_explained: str) -> str:
    """`{% partition_rows partitions flow stall_explained %}`: the rows of a page of a flow's partitions
    (`partitions`: each live partition with its last error event, or None), with links to browse its records
    and to compare them with their copies. A tag, not a loop in the template: the template language cost
    about 145 µs a row (7 ms for a page of 50), most of a large flow's page. Not localized: ids and counts."""
    source, target = _text(flow.source.alias), _text(flow.target.alias)
    copies = _text(row_url("web:record-copies", flow.pk))
    return mark_safe(
        "".join(
            _partition_row(live, error, flow, source, target, copies, stall_explained)
            for live, error in partitions
        )
    )


def _partition_row(live, error, flow, source: str, target: str, copies: str, stall_explained: str) -> str:
    row = live.row
    topic, partition = _text(row.topic), _text(row.partition)
    if error:
        last_error = f'<span class="error-text">{_text(error.message)}</span> <span class="muted small">{when(error.at)}</span>'
    elif row.last_error:
        last_error = f'<span class="error-text">{_text(row.last_error)}</span>'
    elif live.state == "STALL":
        last_error = f'<span class="error-text">{_text(stall_explained)}</span>'
    else:
        last_error = '<span class="muted">—</span>'
    offset = 0 if row.replicated_offset is None else row.replicated_offset
    return (
        f'\n      <tr data-rate-key="{topic}/{partition}" data-rate-count="{_text(offset)}" '
        f'data-rate-at="{_text(epoch(row.observed_at))}">'
        f'\n        <td><a href="{_text(row_url("web:topic", flow.source.alias, row.topic))}?partition={partition}" '
        f'title="browse its records on {source}"><code>{topic}</code></a></td><td>{partition}</td>'
        f'<td><a href="{copies}?topic={_text(urlencode(row.topic))}&amp;partition={partition}" '
        f'title="the newest records beside their copies on {target}"><code>{_text(row.remote_topic)}</code></a></td>'
        f'\n        <td class="num">{_text(numbers.count(row.records_behind))}</td>'
        f'<td class="num">{_text(numbers.seconds(row.seconds_behind))}</td>'
        '\n        <td class="num"><span class="js-rate" title="records per second, measured between refreshes">'
        f"{_text(floatformat(row.record_rate, 1))} rec/s</span></td>"
        f'\n        <td class="num">{_text(millis(row.replication_latency_ms))}</td>'
        f'\n        <td><span class="badge {_text(live.health)}" title="the worker\'s state: {_text(live.state)}">'
        f"{_text(live.health_label)}</span></td>"
        f'\n        <td class="small">{observed(live)}</td>'
        f"\n        <td>{last_error}</td>"
        "\n      </tr>\n      "
    )


@register.filter
def allows(flow, action: str) -> bool:
    """`{% if flow|allows:"pause" %}`: whether the flow's state allows the action (controlplane.flows.lifecycle)."""
    return action in lifecycle.allowed_actions(flow.state)


@register.filter
def when(value: datetime | str | None) -> str:
    """A <time> in the server's zone with the zone named, e.g. 2025-01-02 03:04:05 UTC (an ISO text, as
    JSON results keep moments, is read first)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is None:
        return "—"
    try:
        local = timezone.localtime(value)
    except OverflowError:  # the server's zone moves a moment near year 1 or 9999 off the calendar
        local = value
    return mark_safe(
        f'<time datetime="{_text(local.isoformat())}">{_text(local.strftime("%Y-%m-%d %H:%M:%S %Z"))}</time>'
    )


@register.simple_tag
def observed(live) -> str:
    """`{% observed live %}`: when `live`'s figures were observed (`when`), with how long ago when they are
    stale; "no report yet" before the first. A tag, not an included template: it is in every row of the flows
    table and of a flow's partitions."""
    if not live.observed_at:
        return mark_safe('<span class="badge waiting">no report yet</span>')
    if live.stale:
        return mark_safe(
            f'{when(live.observed_at)} <span class="badge stale">last seen {_text(numbers.seconds(live.age_s))} ago</span>'
        )
    return when(live.observed_at)


@register.filter
def record_time(record) -> str:
    """A record's timestamp (controlplane.browse.records.ShownRecord): its moment, or the raw milliseconds
    when they lie outside years 1-9999 (any 64-bit number a producer wrote)."""
    if record.timestamp is None and record.timestamp_ms is not None:
        return f"{record.timestamp_ms} ms since the epoch (outside years 1-9999)"
    return when(record.timestamp)


@register.filter
def epoch(value: datetime | None) -> str:
    """Seconds since the epoch, for the browser's rate and chart script."""
    return "" if value is None else f"{value.timestamp():.3f}"


register.filter("count", numbers.count)
register.filter("seconds", numbers.seconds)


@register.filter
def millis(value: int | None) -> str:
    return "—" if value is None else f"{value:,} ms"


@register.filter
def ago(value: datetime | str | None) -> str:
    """How long ago, e.g. `3.0 s ago` (a dash when never; an ISO text is read first)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if value is None:
        return "—"
    return f"{numbers.seconds(max((timezone.now() - value).total_seconds(), 0.0))} ago"


@register.filter
def changes(event) -> list[FieldChange]:
    """An audit event's changed fields (field, before -> after); secrets stay as masked as stored."""
    return audit_changes(event.before, event.after)


@register.filter
def presence_age(worker, now: float) -> float:
    """Seconds since a worker's last announcement (controlplane.core.presence.Presence)."""
    return worker.age_s(now)


@register.inclusion_tag("web/_sort_header.html")
def sort_header(listing, name: str, label: str, numeric: bool = False) -> dict:
    """A column header that sorts the list by `name` (web.listing): a link, with aria-sort when sorted."""
    return {
        "label": label,
        "url": listing.sort_url(name),
        "direction": listing.sort_direction(name),
        "numeric": numeric,
    }


@register.inclusion_tag("web/_wait_fields.html")
def wait_fields(kind: str, prefix: str) -> dict:
    """The inputs of the waits a `kind` form asks for (web.waits), their ids prefixed with `prefix`."""
    return {"waits": FORM_WAITS[kind], "prefix": prefix}


@register.simple_tag
def url_with(listing, **changes) -> str:
    """The list's query string with `changes` (web.listing.Listing.url)."""
    return listing.url(**changes)
