"""The property boxes of the web forms read Java .properties syntax, as mm2.properties (pure)."""

from __future__ import annotations

import pytest
from django import forms

from controlplane.web.forms import parse_scoped_lines, scoped_lines


def test_property_boxes_read_mm2_syntax() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "security.protocol: SASL_SSL\n"
        "request.timeout.ms 30000\n"
        "producer.linger.ms = 20  \n"
        "sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="u" password="p";\n'
        "client.id = caf\\u00e9\\tx\n"
        "consumer.=odd\n"
    )
    assert parse_scoped_lines(text) == {
        "client": {
            "security.protocol": "SASL_SSL",
            "request.timeout.ms": "30000",
            "sasl.jaas.config": (
                'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
            ),
            "client.id": "café\tx",
            "consumer.": "odd",  # no property after the role: a client property named so, refused later
        },
        "producer": {"linger.ms": "20"},
        "consumer": {},
        "admin": {},
    }


def test_a_line_that_cannot_be_read_names_the_line_and_the_fix() -> None:
    with pytest.raises(forms.ValidationError) as caught:
        parse_scoped_lines("a = 1\nb = \\u12G4\n")
    (message,) = caught.value.messages
    assert message.startswith("line 2: malformed \\uxxxx escape") and "Fix: write \\u" in message


def test_what_is_shown_reads_back_unchanged() -> None:
    scoped = {
        "client": {"ssl.endpoint.identification.algorithm": "", "key with: odd=chars": " lead\\trail"},
        "producer": {"linger.ms": "20"},
        "consumer": {},
        "admin": {"request.timeout.ms": "5"},
    }
    text = scoped_lines(scoped)
    assert "producer.linger.ms=20" in text.splitlines()
    back = parse_scoped_lines(text)
    # MM2 trims values: the only change is the leading space of a value.
    assert back["client"]["key with: odd=chars"] == "lead\\trail"
    assert {scope: values for scope, values in back.items() if scope != "client"} == {
        "producer": {"linger.ms": "20"},
        "consumer": {},
        "admin": {"request.timeout.ms": "5"},
    }
