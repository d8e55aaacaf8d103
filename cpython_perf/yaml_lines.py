"""YAML whose mappings remember the line of each key, and errors that name 'file:line'.

matrix.yaml and the recipes are read with it, so that every error of theirs names the line it is about.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml

from .errors import MatrixError



class LineDict(dict):
    """A mapping that remembers the line of each key (1-based)."""

    line = 0
    lines: dict


class _LineLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader, node):
    loader.flatten_mapping(node)
    mapping = LineDict()
    mapping.line = node.start_mark.line + 1
    mapping.lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in mapping:
            raise MatrixError(
                f"{loader.name}:{line}: duplicate key {key!r} "
                f"(first at line {mapping.lines[key]})"
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
        mapping.lines[key] = line
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: Path):
    """The YAML document of path, a LineDict at the top; MatrixError naming the line otherwise."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise MatrixError(f"{path}: cannot read: {exc.strerror}") from None
    loader = _LineLoader(text)
    loader.name = str(path)
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise MatrixError(f"{where}: not valid YAML: {exc.problem or exc}") from None
    finally:
        loader.dispose()
    if not isinstance(data, LineDict):
        raise MatrixError(f"{path}:1: expected a mapping at the top level")
    return data


class Where:
    """Formats 'file:line: message' for a mapping and one of its keys."""

    def __init__(self, path: Path):
        self.path = path

    def error(self, mapping, key, message) -> MatrixError:
        line = getattr(mapping, "lines", {}).get(key) or getattr(mapping, "line", 0)
        return MatrixError(f"{self.path}:{line}: {message}")

    def check_keys(self, mapping, allowed, what):
        if not isinstance(mapping, dict):
            raise MatrixError(f"{self.path}: {what} must be a mapping, not {type(mapping).__name__}")
        for key in mapping:
            if key not in allowed:
                hint = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
                raise self.error(
                    mapping, key,
                    f"unknown key {key!r} in {what} (allowed: {', '.join(sorted(allowed))}){suggestion}",
                )

    def require(self, mapping, key, what):
        if key not in mapping:
            raise MatrixError(f"{self.path}:{getattr(mapping, 'line', 0)}: {what} lacks required key {key!r}")
        return mapping[key]
