"""Web forms: shape checks and parsing only; the engine's rules run in the services (their errors land on
the field they name). Secrets are write-only: no form ever renders a stored secret back."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from django import forms

from controlplane import assurance
from controlplane.alerts.models import AlertRule, ChannelKind
from controlplane.core.bounds import INT64_MAX, MAX_SECONDS
from controlplane.core.errors import NON_FIELD, ServiceValidationError
from controlplane.flows import engine, selectors
from controlplane.flows.models import Cluster, Flow, SaslMechanism, SecurityProtocol
from replication.config import FLOW_PROPERTIES, FlowProperty
from replication.flow_rules import CLIENT_ROLES, JAVA_INT_MAX, JAVA_INT_MIN, parse_flow_value, value_problem
from replication.policy import ACCEPTED_POLICY_CLASSES
from replication.properties import PropertiesSyntaxError, escape, read_properties

PROPERTIES_HELP = (
    "One property per line, name=value (Java .properties syntax, as in mm2.properties). Prefix producer., "
    "consumer. or admin. to scope it to that client."
)


def add_service_errors(
    form: forms.Form, error: ServiceValidationError, *, aliases: Mapping[str, str]
) -> None:
    """Put each service message on the form field it names (`aliases` maps service names to fields)."""
    for name, messages in error.errors.items():
        field = aliases.get(name, name)
        target = field if field in form.fields and name != NON_FIELD else None
        for message in messages:
            form.add_error(target, message)


# -- properties text --------------------------------------------------------------------------------------
def parse_scoped_lines(text: str, *, secret: bool = False) -> engine.ScopedProperties:
    """Properties text (the syntax of mm2.properties: `replication.properties`) into scopes:
    `producer.linger.ms=5` -> {"producer": {"linger.ms": "5"}}. Values are trimmed, as MM2 trims them.
    A `secret` text's errors name the line and the fix, never what it holds."""
    try:
        entries = read_properties(text)
    except PropertiesSyntaxError as exc:
        raise forms.ValidationError(
            [
                f"line {problem.line}: "
                + ("cannot be read (a secret: not repeated here)" if secret else problem.reason)
                + f". Fix: {problem.fix}"
                for problem in exc.problems
            ]
        ) from None
    scoped = engine.empty_scopes()
    for entry in entries:
        scope, dot, rest = entry.key.partition(".")
        if dot and rest and scope in CLIENT_ROLES:
            scoped[scope][rest] = entry.value.strip()
        else:
            scoped["client"][entry.key] = entry.value.strip()
    return scoped


def properties_text(properties: Mapping[str, str]) -> str:
    """`name=value` lines, escaped so that `read_properties` reads them back unchanged."""
    return "\n".join(
        f"{escape(name, key=True)}={escape(value, key=False)}" for name, value in sorted(properties.items())
    )


def scoped_lines(scoped: Mapping[str, Mapping[str, str]]) -> str:
    """The text `parse_scoped_lines` reads back as `scoped`."""
    return properties_text(
        {
            name if scope == "client" else f"{scope}.{name}": value
            for scope, values in scoped.items()
            for name, value in values.items()
        }
    )


# -- clusters ---------------------------------------------------------------------------------------------
SECRET_HELP = "Write-only: leave blank to keep the stored value."


class _WriteOnly:
    """A widget that never renders a value: a form shown again after a validation error does not send the
    secrets typed into it back to the browser (what PasswordInput(render_value=False) does)."""

    def format_value(self, value: Any) -> None:
        return None


class WriteOnlyTextarea(_WriteOnly, forms.Textarea):
    pass


class WriteOnlyTextInput(_WriteOnly, forms.TextInput):
    pass


_SECRET_WIDGETS = {
    "sasl_username": WriteOnlyTextInput(attrs={"autocomplete": "off"}),
    "sasl_password": forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    "ssl_ca_pem": WriteOnlyTextarea(attrs={"rows": 3}),
    "ssl_certificate_pem": WriteOnlyTextarea(attrs={"rows": 3}),
    "ssl_key_pem": WriteOnlyTextarea(attrs={"rows": 3}),
    "ssl_key_password": forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
}


class ClusterForm(forms.Form):
    alias = forms.CharField(
        max_length=100, help_text="The MM2 cluster alias, e.g. dc1 (letters, digits, _ and -)."
    )
    bootstrap_servers = forms.CharField(
        max_length=2000, help_text="host:port of one or more brokers, comma-separated."
    )
    security_protocol = forms.ChoiceField(
        choices=SecurityProtocol.choices, initial=SecurityProtocol.PLAINTEXT
    )
    sasl_mechanism = forms.ChoiceField(choices=SaslMechanism.choices, required=False, label="SASL mechanism")
    client_properties = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text=PROPERTIES_HELP
    )
    other_secrets = forms.CharField(
        widget=WriteOnlyTextarea(attrs={"rows": 2, "autocomplete": "off"}),
        required=False,
        label="Other secret properties",
        help_text="Write-only, e.g. sasl.jaas.config=... " + PROPERTIES_HELP,
    )
    remove_secrets = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Remove stored secrets"
    )

    def __init__(self, *args, cluster: Cluster | None = None, **kwargs) -> None:
        if cluster is not None:
            kwargs.setdefault(
                "initial",
                {
                    "alias": cluster.alias,
                    "bootstrap_servers": cluster.bootstrap_servers,
                    "security_protocol": cluster.security_protocol,
                    "sasl_mechanism": cluster.sasl_mechanism,
                    "client_properties": scoped_lines(cluster.client_properties),
                },
            )
        super().__init__(*args, **kwargs)
        stored = engine.secret_names(engine.cluster_secrets(cluster)) if cluster else []
        self.secrets_set = stored
        for name, property_name in engine.SECRET_FIELDS.items():
            self.fields[name] = forms.CharField(
                required=False,
                strip=name not in {"sasl_password", "ssl_key_password"},
                widget=_SECRET_WIDGETS[name],
                label=property_name,
                help_text=SECRET_HELP if f"client.{property_name}" in stored else "Write-only.",
            )
        if stored:
            self.fields["remove_secrets"].choices = [(name, name) for name in stored]
        else:
            del self.fields["remove_secrets"]
        self.order_fields(["alias", "bootstrap_servers", "security_protocol", "sasl_mechanism"])

    def secret_fields(self) -> list[forms.BoundField]:
        names = [*engine.SECRET_FIELDS, "other_secrets", *(["remove_secrets"] if self.secrets_set else [])]
        return [self[name] for name in names]

    def clean_client_properties(self) -> engine.ScopedProperties:
        return parse_scoped_lines(self.cleaned_data["client_properties"])

    def clean_other_secrets(self) -> engine.ScopedProperties:
        return parse_scoped_lines(self.cleaned_data["other_secrets"], secret=True)

    def columns(self) -> dict[str, Any]:
        return {
            name: self.cleaned_data[name]
            for name in (
                "alias",
                "bootstrap_servers",
                "security_protocol",
                "sasl_mechanism",
                "client_properties",
            )
        }

    def secret_changes(self) -> engine.ScopedProperties:
        """Set what was typed, remove what was ticked, keep the rest (blank means keep)."""
        changes = {scope: dict(values) for scope, values in self.cleaned_data["other_secrets"].items()}
        for field_name, property_name in engine.SECRET_FIELDS.items():
            if self.cleaned_data.get(field_name):
                changes["client"][property_name] = self.cleaned_data[field_name]
        for name in self.cleaned_data.get("remove_secrets", []):
            scope, _, property_name = name.partition(".")
            changes[scope][property_name] = ""
        return changes

    def add_service_errors(self, error: ServiceValidationError) -> None:
        add_service_errors(self, error, aliases={"secret_properties": "other_secrets"})


# -- flows ------------------------------------------------------------------------------------------------
# Shown first; the rest of MM2's flow properties sit under "Advanced".
PRIMARY_FLOW_FIELDS = (
    "enabled",
    "topics",
    "topics_exclude",
    "groups",
    "groups_exclude",
    "replication_policy_class",
    "replication_policy_separator",
    "delivery_guarantee",
    "data_loss_policy",
    "tasks_max",
    "sync_group_offsets_enabled",
)
# The fields the topic preview depends on.
PREVIEW_FIELDS = ("topics", "topics_exclude", "replication_policy_class", "replication_policy_separator")
_FLOW_HELP = {
    "enabled": "A disabled flow is stored but does not replicate.",
    "topics": "Java regular expressions, comma-separated, matched against whole topic names.",
    "topics_exclude": "Topics matching any of these are not replicated.",
    "groups": "Consumer groups whose offsets are checkpointed (Java regular expressions).",
    "replication_policy_separator": "Remote topics are named <source alias><separator><topic>.",
}


class PatternListField(forms.CharField):
    """An MM2 list property: comma-separated Java regexes, read and judged by the engine's flow rules."""

    def __init__(self, *, prop: FlowProperty, **kwargs) -> None:
        self.prop = prop
        super().__init__(required=False, max_length=10_000, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(value) if isinstance(value, (list, tuple)) else value

    def clean(self, value: Any) -> list[str]:
        patterns = parse_flow_value(self.prop, super().clean(value))
        if problem := value_problem(self.prop, patterns):
            reason, fix = problem
            raise forms.ValidationError(f"{reason}. Fix: {fix}")
        return list(patterns)


def _flow_field(prop: FlowProperty) -> forms.Field:
    common = {"label": prop.name, "help_text": _FLOW_HELP.get(prop.field, "")}
    if prop.kind is bool:
        return forms.BooleanField(required=False, **common)
    if prop.kind is int:
        return forms.IntegerField(min_value=JAVA_INT_MIN, max_value=JAVA_INT_MAX, **common)
    if prop.kind is tuple:
        return PatternListField(prop=prop, **common)
    if isinstance(prop.kind, type) and issubclass(prop.kind, Enum):
        return forms.ChoiceField(choices=[(member.value, member.value) for member in prop.kind], **common)
    if prop.field == "replication_policy_class":
        return forms.ChoiceField(choices=[(name, name) for name in ACCEPTED_POLICY_CLASSES], **common)
    return forms.CharField(strip=False, max_length=200, **common)


class FlowForm(forms.Form):
    source = forms.ModelChoiceField(queryset=Cluster.objects.none(), empty_label="choose the source cluster")
    target = forms.ModelChoiceField(queryset=Cluster.objects.none(), empty_label="choose the target cluster")
    extra = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        label="Flow client overrides",
        help_text="e.g. producer.linger.ms=20 (written as source->target.producer.linger.ms). One per line.",
    )
    pool = forms.CharField(
        required=False,
        max_length=200,  # the service explains a name that is too long
        label="Worker pool",
        help_text="the workers that run this flow: those consuming replication.<pool>; empty: the default pool",
    )
    # The RPO budget (controlplane.alerts; not an MM2 property): an alert fires past it.
    rpo_seconds_behind = forms.FloatField(
        min_value=0.001,
        max_value=MAX_SECONDS,
        required=False,
        label="RPO budget: seconds behind",
        help_text="an alert fires when the flow is further behind than this (seconds_behind); empty: 60",
    )
    rpo_records_behind = forms.IntegerField(
        min_value=0,
        max_value=INT64_MAX,
        required=False,
        label="RPO budget: records behind",
        help_text="an alert fires past this many records behind; empty: no records budget",
    )

    def __init__(self, *args, flow: Flow | None = None, **kwargs) -> None:
        settings = engine.flow_settings(flow or Flow())
        initial = {prop.field: settings[prop.field] for prop in FLOW_PROPERTIES}
        budget = assurance.rpo_budget_of(flow=flow) if flow is not None else assurance.DEFAULT_BUDGET
        initial |= {"rpo_seconds_behind": budget.seconds_behind, "rpo_records_behind": budget.records_behind}
        initial["extra"] = properties_text(settings["extra"])
        initial["pool"] = flow.pool if flow is not None else ""
        if flow is not None:
            initial |= {"source": flow.source_id, "target": flow.target_id}
        else:  # a flow made in the form is meant to run (the API keeps MM2's enabled=false: docs/api.md)
            initial["enabled"] = True
        kwargs.setdefault("initial", initial)
        super().__init__(*args, **kwargs)
        clusters = selectors.cluster_list()
        self.fields["source"].queryset = self.fields["target"].queryset = clusters
        if flow is not None:  # another pair is another flow
            self.fields["source"].disabled = self.fields["target"].disabled = True
        for prop in FLOW_PROPERTIES:
            self.fields[prop.field] = _flow_field(prop)
        for name in ("source", "target", "enabled", *PREVIEW_FIELDS):  # the preview follows these
            self.fields[name].widget.attrs["class"] = "previewed"

    def primary_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in PRIMARY_FLOW_FIELDS]

    def preview_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in PREVIEW_FIELDS]

    def advanced_fields(self) -> list[forms.BoundField]:
        return [self[prop.field] for prop in FLOW_PROPERTIES if prop.field not in PRIMARY_FLOW_FIELDS]

    def clean_extra(self) -> dict[str, str]:
        return _flatten(parse_scoped_lines(self.cleaned_data["extra"]))

    def settings(self) -> dict[str, Any]:
        return {prop.field: self.cleaned_data[prop.field] for prop in FLOW_PROPERTIES} | {
            "extra": self.cleaned_data["extra"],
            "pool": self.cleaned_data["pool"].strip(),
        }

    def rpo_budget(self) -> dict[str, Any]:
        return {
            "seconds_behind": self.cleaned_data["rpo_seconds_behind"]
            or assurance.DEFAULT_BUDGET.seconds_behind,
            "records_behind": self.cleaned_data["rpo_records_behind"],
        }

    def add_service_errors(self, error: ServiceValidationError) -> None:
        add_service_errors(self, error, aliases={})


def _flatten(scoped: engine.ScopedProperties) -> dict[str, str]:
    """Flow-scoped overrides keep their role prefix: {"producer.linger.ms": "20"}."""
    return {
        name if scope == "client" else f"{scope}.{name}": value
        for scope, values in scoped.items()
        for name, value in values.items()
    }


# -- MM2 import -------------------------------------------------------------------------------------------
MAX_MM2_BYTES = 1_000_000


PLACEHOLDER_FIELD_PREFIX = "env_"


class Mm2ImportForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
        required=False,
        strip=False,
        max_length=MAX_MM2_BYTES,
        label="mm2.properties or Strimzi KafkaMirrorMaker2 (YAML)",
        help_text=(
            "Paste the file or the resource, or upload it below. ${env:VAR} placeholders (and the values of "
            "a resource's Secrets) may stand only in a cluster's client properties; they are asked for "
            "(write-only) unless the server's administrator allowed the variable, and stored as secrets."
        ),
    )
    upload = forms.FileField(required=False, label="…or upload a file")
    force = forms.BooleanField(
        required=False,
        label="Import clusters that share brokers with another alias",
        help_text="refused otherwise: one cluster under two aliases makes replication loops",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        upload = cleaned.get("upload")
        if upload is not None:
            if upload.size > MAX_MM2_BYTES:
                raise forms.ValidationError(
                    "the file is larger than 1 MB: is it really an mm2.properties file?"
                )
            try:
                cleaned["text"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError(
                    "the file is not UTF-8 text: save it as UTF-8 and upload again"
                ) from None
        if not cleaned.get("text", "").strip():
            raise forms.ValidationError("paste an mm2.properties file or choose one to upload")
        return cleaned

    def ask_for_placeholders(self, names: list[str]) -> dict[str, str]:
        """Adds a write-only field per `${env:VAR}` the server lacks (`names`); returns the values typed
        for them (only the filled ones). The fields never render a value: a page shows them empty."""
        typed: dict[str, str] = {}
        for name in names:
            field_name = f"{PLACEHOLDER_FIELD_PREFIX}{name}"
            self.fields[field_name] = forms.CharField(
                required=False,
                strip=False,
                label=f"${{env:{name}}}",
                widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
                help_text="the server does not provide it: type its value (write-only, stored as a secret)",
            )
            if self.data.get(field_name):
                typed[name] = self.data[field_name]
        return typed

    def placeholder_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.fields if name.startswith(PLACEHOLDER_FIELD_PREFIX)]


# -- alerts -----------------------------------------------------------------------------------------------
class SilenceForm(forms.Form):
    flow = forms.ModelChoiceField(queryset=Flow.objects.none(), required=False, empty_label="every flow")
    rule = forms.ChoiceField(choices=[("", "every rule"), *AlertRule.choices], required=False)
    duration_h = forms.FloatField(
        min_value=0.01, max_value=720, initial=2, label="For (hours)", help_text="the silence expires then"
    )
    reason = forms.CharField(
        max_length=500, required=False, help_text="e.g. planned maintenance of cluster A"
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["flow"].queryset = selectors.flow_list()

    def add_service_errors(self, error: ServiceValidationError) -> None:
        add_service_errors(self, error, aliases={"duration_s": "duration_h", "expires_at": "duration_h"})


class ChannelForm(forms.Form):
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=ChannelKind.choices)
    url = forms.CharField(
        required=False,
        max_length=2000,
        label="URL",
        widget=forms.PasswordInput(render_value=False),
        help_text="webhook or Slack incoming-webhook URL (kept secret; leave empty to keep the stored one)",
    )
    email_to = forms.CharField(
        required=False, label="Email to", help_text="addresses, comma-separated (email channels)"
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def values(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "kind": data["kind"],
            "url": data["url"] or None,
            "email_to": [a.strip() for a in data["email_to"].split(",") if a.strip()],
            "enabled": data["enabled"],
        }

    def add_service_errors(self, error: ServiceValidationError) -> None:
        add_service_errors(self, error, aliases={})
