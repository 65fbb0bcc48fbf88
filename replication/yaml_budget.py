"""YAML a user pasted, read under a budget: the text is bounded in size, nesting is bounded in depth, an
alias counts as every node it stands for (a "billion laughs" of nine-wide aliases six levels deep is
531,441 nodes from 550 bytes), an alias inside its own anchor is refused, and only the core schema's tags
are read (`!!python/name:` and the like never reach a constructor).

The budget is checked on the parser's events, which PyYAML produces without recursion, before anything
is composed, so no input costs more than one pass over at most MAX_YAML_BYTES."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

MAX_YAML_BYTES = 512 * 1024  # a KafkaMirrorMaker2 resource of 200 mirrors is about 60 KB
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000  # aliases expanded
_CORE = "tag:yaml.org,2002:"
CORE_TAGS = frozenset(f"{_CORE}{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq"))
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class YamlBudgetError(Exception):
    """Why the text is refused: `line` (1-based) where known."""

    line: int | None
    reason: str
    fix: str


def compose_documents(text: str) -> list[yaml.Node]:
    """The documents of `text` (empty ones left out), composed once the text is within the budget;
    YamlBudgetError says what is over it, yaml.YAMLError what is not YAML."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise YamlBudgetError(
            None,
            f"the text is {size:,} bytes, over the {MAX_YAML_BYTES:,} read",
            "paste one KafkaMirrorMaker2 resource at a time, without status or managedFields",
        )
    _check_events(text)
    return [node for node in yaml.compose_all(text, Loader=_LOADER) if node is not None]


def _check_events(text: str) -> None:
    sizes: dict[str, int] = {}  # anchor -> the values it stands for, once its node has ended
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, values before it) per open mapping/sequence
    values = 0  # read so far, aliases expanded
    try:
        events = list(yaml.parse(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        if "nesting depth" not in str(
            exc
        ):  # libyaml's own bound (1,000), met before ours when scanning ahead
            raise
        raise _too_deep(getattr(exc, "problem_mark", None) and exc.problem_mark.line + 1) from None
    for event in events:
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:
                raise YamlBudgetError(
                    line,
                    f"the alias *{event.anchor} refers to its own anchor or to none before it",
                    "write the value out instead of the alias",
                )
            values += sizes[event.anchor]
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, before = open_nodes.pop()
            if anchor is not None:
                sizes[anchor] = values - before
        elif isinstance(event, yaml.NodeEvent):
            _check_tag(event, line)
            if isinstance(event, yaml.CollectionStartEvent):
                if len(open_nodes) >= MAX_YAML_DEPTH:
                    raise _too_deep(line)
                open_nodes.append((event.anchor, values))
            elif event.anchor is not None:
                sizes[event.anchor] = 1
            values += 1
        if values > MAX_YAML_NODES:
            raise YamlBudgetError(
                line,
                f"the text stands for more than {MAX_YAML_NODES:,} values once its aliases are expanded",
                "write the resource without anchors and aliases (*name)",
            )


def _too_deep(line: int | None) -> YamlBudgetError:
    return YamlBudgetError(
        line,
        f"values are nested deeper than {MAX_YAML_DEPTH} levels",
        "a KafkaMirrorMaker2 resource nests a few levels: paste the resource itself",
    )


def _check_tag(event: yaml.NodeEvent, line: int | None) -> None:
    tag = getattr(event, "tag", None)
    if tag is None or tag == "!" or tag in CORE_TAGS:
        return
    shown = f"!!{tag.removeprefix(_CORE)}" if tag.startswith(_CORE) else tag
    raise YamlBudgetError(
        line,
        f"the tag {shown} is not one of YAML's core schema (str, int, float, bool, null, map, seq)",
        f"remove {shown}: write the value plainly",
    )
