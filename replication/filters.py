"""MM2's topic, group, subject and config-property filters.

MM2 lists (`topics`, `topics.exclude`, `groups`, ...) are comma-separated Java regular expressions matched
against the whole name. Names come from any Kafka client, so matching must not backtrack: every pattern
goes through `replication.java_regex.compile_java_regex` (RE2, with the meaning the pattern has in Java).
The control plane validates patterns with the same function the engine matches with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from replication.java_regex import compile_java_regex

if TYPE_CHECKING:
    from replication.config import FlowConfig


class _IncludeExcludeFilter:
    """Names matching any include pattern and no exclude pattern (MM2's default filters)."""

    def __init__(
        self, include: Sequence[str], exclude: Sequence[str], *, property_names: tuple[str, str]
    ) -> None:
        self.include_property, self.exclude_property = property_names
        self._include = [(p, compile_java_regex(p, property_name=self.include_property)) for p in include]
        self._exclude = [(p, compile_java_regex(p, property_name=self.exclude_property)) for p in exclude]

    def exclusion_reason(self, name: str) -> str | None:
        """Why `name` is filtered out, or None when it passes."""
        for pattern, compiled in self._exclude:
            if compiled.fullmatch(name):
                return f"matches {self.exclude_property} pattern '{pattern}'"
        if not any(compiled.fullmatch(name) for _, compiled in self._include):
            return f"matches no {self.include_property} pattern"
        return None

    def _passes(self, name: str) -> bool:
        return self.exclusion_reason(name) is None


class TopicFilter(_IncludeExcludeFilter):
    def __init__(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        *,
        property_names: tuple[str, str] = ("topics", "topics.exclude"),
    ) -> None:
        super().__init__(include, exclude, property_names=property_names)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> TopicFilter:
        return cls(flow.topics, flow.topics_exclude)

    def should_replicate_topic(self, topic: str) -> bool:
        return self._passes(topic)


class GroupFilter(_IncludeExcludeFilter):
    def __init__(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        *,
        property_names: tuple[str, str] = ("groups", "groups.exclude"),
    ) -> None:
        super().__init__(include, exclude, property_names=property_names)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> GroupFilter:
        return cls(flow.groups, flow.groups_exclude)

    def should_replicate_group(self, group: str) -> bool:
        return self._passes(group)


class SubjectFilter(_IncludeExcludeFilter):
    """Schema registry subjects a flow syncs (`replication.schemas.subjects`)."""

    def __init__(
        self,
        include: Sequence[str] = (".*",),
        exclude: Sequence[str] = (),
        *,
        property_names: tuple[str, str] = ("schemas.subjects", "schemas.subjects.exclude"),
    ) -> None:
        super().__init__(include, exclude, property_names=property_names)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> SubjectFilter:
        return cls(flow.schemas_subjects, flow.schemas_subjects_exclude)

    def should_sync_subject(self, subject: str) -> bool:
        return self._passes(subject)


class ConfigPropertyFilter(_IncludeExcludeFilter):
    """Topic config properties copied to remote topics: all but those matching `config.properties.exclude`."""

    def __init__(self, exclude: Sequence[str], *, property_name: str = "config.properties.exclude") -> None:
        super().__init__([".*"], exclude, property_names=("config.properties", property_name))

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> ConfigPropertyFilter:
        return cls(flow.config_properties_exclude)

    def should_replicate_config_property(self, name: str) -> bool:
        return self._passes(name)
