"""The tags in every row of the flows table and of a flow's partitions. `row_url`, the links those tags write:
Django's `{% url %}` for the same name and arguments under the request's script prefix, reversed once per
process for each (the flows page reversed two per row, 100 per request). `{% observed %}`: when the row's
figures were observed, with their age when stale (an included template before). `{% flow_state %}` and
`{% pause_resume %}`: the state and health badges and the pause or resume button (included templates
before). `{% partition_rows %}`: a flow's page of partitions (a template loop before)."""

from __future__ import annotations

import datetime
from types import SimpleNamespace

from django.template import engines
from django.urls import reverse, set_script_prefix

from controlplane.web.templatetags.cached_urls import reversed_url
from controlplane.web.templatetags.web import row_url

URL_TAG = engines["django"].from_string('{% url "web:flow-pause" pk %}')


def test_row_url_is_the_url_tag_reversed_once_per_name_arguments_and_script_prefix():
    reversed_url.cache_clear()
    shown = set()
    try:
        for prefix in ("/", "/mirrorplane/", "/"):
            set_script_prefix(prefix)
            for _ in range(3):
                for pk in (1, 2):
                    remembered = row_url("web:flow-pause", pk)
                    assert remembered == URL_TAG.render({"pk": pk}) == reverse("web:flow-pause", args=[pk])
                    shown.add(remembered)
    finally:
        set_script_prefix("/")
    assert shown == {
        "/flows/1/pause/",
        "/flows/2/pause/",
        "/mirrorplane/flows/1/pause/",
        "/mirrorplane/flows/2/pause/",
    }
    # of 36 asked (`{% url %}` is remembered too, under the same key): each flow under each prefix once
    assert reversed_url.cache_info().misses == 4


OBSERVED = engines["django"].from_string("{% load web %}<td>{% observed live %}</td>")
AT = datetime.datetime(2026, 11, 29, 6, 30, 5, tzinfo=datetime.UTC)
TIME = '<time datetime="2026-11-29T06:30:05+00:00">2026-11-29 06:30:05 UTC</time>'


def test_observed_says_when_and_how_long_ago_when_stale_and_no_report_before_the_first():
    def shown(**live) -> str:
        return OBSERVED.render({"live": SimpleNamespace(**live)})

    assert shown(observed_at=AT, stale=False, age_s=3.0) == f"<td>{TIME}</td>"
    assert shown(observed_at=AT, stale=True, age_s=600.0) == (
        f'<td>{TIME} <span class="badge stale">last seen 10 min 0 s ago</span></td>'
    )
    assert shown(observed_at=None, stale=True, age_s=None) == (
        '<td><span class="badge waiting">no report yet</span></td>'
    )


ROW = engines["django"].from_string(
    "{% load web %}<td>{% flow_state live %}</td><td>{% pause_resume live.flow %}</td>"
)


def test_a_flow_row_shows_its_state_its_health_when_that_says_more_and_the_action_its_state_allows():
    def shown(state: str, health: str, health_label: str = "") -> str:
        flow = SimpleNamespace(pk=7, state=state, name="A->B", source=SimpleNamespace(alias="A<1>"))
        return ROW.render({"live": SimpleNamespace(flow=flow, health=health, health_label=health_label)})

    pause = (
        '<button type="button" class="small" data-opens="pause-flow" data-action="/flows/7/pause/" '
        'data-flow="A-&gt;B" data-source="A&lt;1&gt;">Pause…</button>'
    )
    assert shown("active", "ok") == f'<td><span class="badge ok">active</span></td><td>{pause}</td>'
    assert shown("active", "stale", "stale") == (
        '<td><span class="badge stale">active</span> <span class="badge stale" title="the one health rule: '
        f'docs/lag.md">stale</span></td><td>{pause}</td>'
    )
    assert shown("paused", "paused") == (
        '<td><span class="badge paused">paused</span></td><td><button type="button" class="small" '
        'data-opens="resume-flow" data-action="/flows/7/resume/" data-flow="A-&gt;B">Resume…</button></td>'
    )
    assert shown("migrated", "disabled", "disabled") == (
        '<td><span class="badge disabled">migrated</span> <span class="badge disabled" title="the one health '
        'rule: docs/lag.md">disabled</span></td><td></td>'
    )


ROWS = engines["django"].from_string("{% load web %}{% flow_rows summaries firing can_act %}")


def test_the_flows_table_rows_show_each_flow_its_firing_alerts_and_the_action_for_operators():
    def live(pk: int, name: str, position: int | None) -> SimpleNamespace:
        flow = SimpleNamespace(pk=pk, state="active", name=name, source=SimpleNamespace(alias="A"))
        return SimpleNamespace(
            flow=flow,
            health="ok",
            health_label="",
            position=position,
            observed_at=AT,
            stale=False,
            age_s=1.0,
            partition_count=8,
            records_behind=1234567,
            seconds_behind=90.5,
        )

    def alert(rule: str) -> SimpleNamespace:
        return SimpleNamespace(get_rule_display=lambda: rule)

    summaries = [live(7, "A->B", 9900), live(8, "<C>", None), live(9, "D", 0)]
    firing = {7: [alert("RPO budget exceeded"), alert("status <stale>")], 8: [alert("lag")]}

    def row(pk, name, position, epoch, marker, action) -> str:
        return (
            f'\n  <tr data-rate-key="flow-{pk}" data-rate-count="{position}" data-rate-at="{epoch}">'
            f'\n    <th scope="row"><a href="/flows/{pk}/">{name}</a>{marker}</th>'
            '\n    <td><span class="badge ok">active</span></td>\n    <td>8</td>'
            '\n    <td class="num records-behind">1,234,567</td>\n    <td class="num">1 min 30 s</td>'
            '\n    <td class="num"><span class="js-rate" title="records per second, measured between refreshes">'
            f"—</span></td>\n    <td>{TIME}</td>\n    {action}\n  </tr>\n  "
        )

    def pause(pk: int, name: str) -> str:
        return (
            f'<td><button type="button" class="small" data-opens="pause-flow" data-action="/flows/{pk}/pause/" '
            f'data-flow="{name}" data-source="A">Pause…</button></td>'
        )

    two = (
        ' <a class="badge error alert-marker" href="/alerts/" title="RPO budget exceeded; status &lt;stale&gt;">'
        "🔔 2 alerts firing</a>"
    )
    one = ' <a class="badge error alert-marker" href="/alerts/" title="lag">🔔 1 alert firing</a>'
    epoch = f"{AT.timestamp():.3f}"
    rows = [
        (7, "A-&gt;B", 9900, epoch, two),
        (8, "&lt;C&gt;", None, epoch, one),
        (9, "D", 0, epoch, ""),
    ]
    for can_act in (True, False):
        shown = ROWS.render({"summaries": summaries, "firing": firing, "can_act": can_act})
        assert shown == "".join(
            row(pk, name, position, epoch, marker, pause(pk, name) if can_act else "")
            for pk, name, position, epoch, marker in rows
        )


# The loop the flow page ran before `{% partition_rows %}`: the tag must show what it showed.
PARTITION_LOOP = engines["django"].from_string(
    """{% load l10n web %}{% localize off %}
      {% for live, error in partitions %}{% with row=live.row %}
      <tr data-rate-key="{{ row.topic }}/{{ row.partition }}" data-rate-count="{{ row.replicated_offset|default_if_none:0 }}" data-rate-at="{{ row.observed_at|epoch }}">
        <td><a href="{% url 'web:topic' flow.source.alias row.topic %}?partition={{ row.partition }}" title="browse its records on {{ flow.source.alias }}"><code>{{ row.topic }}</code></a></td><td>{{ row.partition }}</td><td><a href="{% url 'web:record-copies' flow.pk %}?topic={{ row.topic|urlencode }}&amp;partition={{ row.partition }}" title="the newest records beside their copies on {{ flow.target.alias }}"><code>{{ row.remote_topic }}</code></a></td>
        <td class="num">{{ row.records_behind|count }}</td><td class="num">{{ row.seconds_behind|seconds }}</td>
        <td class="num"><span class="js-rate" title="records per second, measured between refreshes">{{ row.record_rate|floatformat:1 }} rec/s</span></td>
        <td class="num">{{ row.replication_latency_ms|millis }}</td>
        <td><span class="badge {{ live.health }}" title="the worker's state: {{ live.state }}">{{ live.health_label }}</span></td>
        <td class="small">{% observed live %}</td>
        <td>{% if error %}<span class="error-text">{{ error.message }}</span> <span class="muted small">{{ error.at|when }}</span>{% elif row.last_error %}<span class="error-text">{{ row.last_error }}</span>{% elif live.state == "STALL" %}<span class="error-text">{{ stall_explained }}</span>{% else %}<span class="muted">—</span>{% endif %}</td>
      </tr>
      {% endwith %}{% endfor %}
      {% endlocalize %}"""
)
PARTITION_TAG = engines["django"].from_string(
    "{% load web %}\n      {% partition_rows partitions flow stall_explained %}\n      "
)


def test_the_partition_rows_tag_shows_what_the_template_loop_showed():
    flow = SimpleNamespace(pk=7, source=SimpleNamespace(alias="A<&>"), target=SimpleNamespace(alias='B"'))

    def live(topic: str, partition: int, state: str, **figures) -> SimpleNamespace:
        row = SimpleNamespace(
            topic=topic,
            partition=partition,
            remote_topic=f"A<&>.{topic}",
            replicated_offset=figures.get("offset"),
            observed_at=AT,
            records_behind=figures.get("behind"),
            seconds_behind=figures.get("seconds"),
            record_rate=figures.get("rate"),
            replication_latency_ms=figures.get("latency"),
            last_error=figures.get("last_error", ""),
        )
        stale = state == "STALE"
        return SimpleNamespace(
            row=row,
            state=state,
            health="stale" if stale else "ok",
            health_label=f"<{state}>",
            observed_at=AT,
            stale=stale,
            age_s=75.0,
        )

    error = SimpleNamespace(message="fetch <failed> & retried", at=AT)
    partitions = [
        (
            live("orders", 0, "OK", offset=1_234_567, behind=12_345, seconds=3.25, rate=1234.56, latency=42),
            None,
        ),
        (live("a&b/<c> d?e=1#x", 11, "ERR", last_error="broker <down>"), None),
        (live("ünïcode", 2, "STALL", offset=0, behind=0, seconds=0.0, rate=0.0, latency=0), None),
        (live("orders", 3, "STALE", behind=None, rate=None), error),
    ]
    context = {"partitions": partitions, "flow": flow, "stall_explained": "stalled: <see docs/lag.md>"}
    assert PARTITION_TAG.render(context) == PARTITION_LOOP.render(context)
    for with_figures in (partitions[:0], partitions[:1]):
        context["partitions"] = with_figures
        assert PARTITION_TAG.render(context) == PARTITION_LOOP.render(context)
