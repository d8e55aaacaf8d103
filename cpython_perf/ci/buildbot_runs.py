"""What a cpython-perf buildbot run decides, as plain functions (no buildbot needed: the unit tests check them;
buildbot_config and buildbot_steps use them): where a run's uploads go, which cells a connected worker can
take, the revision `git ls-remote` names, which commits are documentation only, when requests may collapse."""

from __future__ import annotations

from pathlib import Path

SKIPPED_FILE = "skipped.json"     # results/<run>/skipped.json: {cell: why it was not run}
NO_WORKER = "no connected worker"


def cell_scheduler(cell: str) -> str:
    return f"cell-{cell}"


def split_by_connected(cells: list[str], workers_of, connected: set[str]) -> tuple[list[str], dict[str, str]]:
    """(the cells a connected worker can take, {skipped cell: why}): a cell none of whose workers is connected
    is not triggered (its request would wait for ever, and the run's report with it)."""
    chosen, skipped = [], {}
    for cell in cells:
        workers = list(workers_of(cell))
        if any(w in connected for w in workers):
            chosen.append(cell)
        else:
            skipped[cell] = f"{NO_WORKER} (none of {', '.join(workers) or 'no workers'} was connected when the run began)"
    return chosen, skipped


def parse_ls_remote(text: str, ref: str) -> str | None:
    """The commit `git ls-remote URL REF` names for exactly REF."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1] == ref and len(parts[0]) >= 40:
            return parts[0]
    return None


def run_key(props: dict) -> str:
    """The run a build belongs to: the triggering matrix build's number, else <builder>-<build number>."""
    return str(props.get("run") or f"{props.get('buildername')}-{props.get('buildnumber')}")


def newest_run(results: str | Path) -> str | None:
    """The run directory under results/ uploaded to last (a report forced without a run reports it)."""
    root = Path(results)
    runs = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    return max(runs, key=lambda p: p.stat().st_mtime).name if runs else None


# A commit touching only these runs nothing (the on-push scheduler's fileIsImportant, as python/buildmaster-
# config skips documentation-only commits): docs/ and Markdown files, except under patches/ (a series' notes
# are part of its inputs).
DOC_PREFIXES = ("docs/",)
DOC_SUFFIXES = (".md",)
ALWAYS_IMPORTANT_PREFIXES = ("patches/",)


def is_important_file(path: str) -> bool:
    path = path.lstrip("/\\")
    if path.startswith(ALWAYS_IMPORTANT_PREFIXES):
        return True
    return not (path.startswith(DOC_PREFIXES) or path.endswith(DOC_SUFFIXES))


def is_important_change(change) -> bool:
    files = getattr(change, "files", None)
    return not files or any(is_important_file(f) for f in files)


def same_values(keys, new: dict, old: dict) -> bool:
    """Two requests' properties ({name: (value, source)}, as the data API gives buildset properties) agree."""
    def value(props, key):
        got = props.get(key)
        return got[0] if isinstance(got, (tuple, list)) else got
    return all(value(new, k) == value(old, k) for k in keys)
