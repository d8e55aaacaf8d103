"""The variant tables of README.md and docs/matrix.md are matrix.yaml's, as `python -m cpython_perf docs` writes
them (cpython_perf/report/generated_tables.py); no Docker."""

from __future__ import annotations

import pytest

from cpython_perf.errors import DriverError
from cpython_perf.matrix import PROJECT_ROOT, load_matrix
from cpython_perf.report import generated_tables

MATRIX = load_matrix()


def test_the_pages_show_the_matrix_variant_table():
    assert generated_tables.stale_pages(MATRIX) == [], "run `python -m cpython_perf docs` and commit the pages"


def test_every_variant_has_one_row_with_its_flags_and_modes():
    rows = generated_tables.variant_table(MATRIX).splitlines()[3:-1]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{name}`" for name in MATRIX.variants]
    fp = next(row for row in rows if row.startswith("| `fp` |"))
    assert MATRIX.variants["fp"].cflags in fp and "`perf` (3.9," in fp
    release = next(row for row in rows if row.startswith("| `release` |"))
    assert "from 3.15: configure `--without-frame-pointers`" in release and "`perf_jit` (" in release


def test_every_arch_has_one_row_saying_how_its_cells_are_built_run_recorded_and_where_ci_runs_them():
    rows = generated_tables.arch_table(MATRIX).splitlines()[3:-1]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{arch}`" for arch in MATRIX.arches]
    by_arch = {arch: row.split(" | ") for arch, row in zip(MATRIX.arches, rows)}
    # riscv64: GitHub has no runner of its own: cross-built and emulated on the x86_64 runner, perf in its guest
    _, debian, built, run, perf, runner, cells = by_arch["riscv64"]
    assert debian == "`riscv64`" and "cross-compiled on x86_64 (`--host=riscv64-linux-gnu`)" in built
    assert "qemu-riscv64" in run and "`qemu-system-riscv64 -M virt -cpu rv64`" in perf and "`cpu-clock`" in perf
    assert runner == f"`{MATRIX.arch_facts['x86_64'].github_runner}` (under qemu)"
    assert cells.rstrip(" |") == ", ".join(f"`{c.name}`" for c in MATRIX.cells_of_arch("riscv64"))
    # i386: no trampoline upstream, so build-only cells and no recording
    assert by_arch["i386"][4].startswith("none: no trampoline upstream")
    assert by_arch["aarch64"][5] == f"`{MATRIX.arch_facts['aarch64'].github_runner}`"


VARIANT_PAGES = ["README.md", "docs/matrix.md"]
STOCK_PAGES = ["README.md", "docs/conformance.md"]


@pytest.mark.parametrize("changed, pages", [
    (MATRIX.variants["O0"].description, VARIANT_PAGES),
    (MATRIX.stock["sid-3.14"].description, STOCK_PAGES),
])
def test_a_changed_row_makes_its_pages_stale(tmp_path, changed, pages):
    for page in generated_tables.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text((PROJECT_ROOT / page).read_text().replace(changed, "something else"))
    assert generated_tables.stale_pages(MATRIX, tmp_path) == pages
    assert generated_tables.write_tables(MATRIX, tmp_path) == pages
    assert generated_tables.stale_pages(MATRIX, tmp_path) == []


def test_every_stock_interpreter_has_a_row_with_its_modes_defects_and_what_to_run_instead():
    rows = generated_tables.stock_table(MATRIX).splitlines()[3:-1]
    assert len(rows) == len(MATRIX.stock)
    for target, row in zip(MATRIX.stock.values(), rows):
        cells = row.split(" | ")
        assert f"`stock-{target.name}`" in cells[0]
        for mode, cell in zip(("perf", "perf_jit"), cells[1:3]):
            assert cell.startswith("works") == (mode in target.modes), (target.name, mode, cell)
            assert ("turns the JIT off" in cell) == (target.jit and mode in target.modes)
        for defect in target.defects:
            d = MATRIX.defects[defect]
            assert (d.upstream if d.reported else "not reported upstream") in cells[3]
            assert d.instead is None or d.instead in cells[5]
    sid = rows[list(MATRIX.stock).index("sid-3.14")]
    assert "no frame pointers" in sid.split(" | ")[1]
    trixie = rows[list(MATRIX.stock).index("trixie-3.13")]
    assert "`deb-trixie-3.13`" in trixie and "`build-3.13-fp`" in trixie
    assert "trampoline itself" in rows[list(MATRIX.stock).index("bookworm-3.11")].split(" | ")[4]
    assert "sys.remote_exec()" in sid.split(" | ")[4] and "remote_exec" not in trixie


def test_the_stock_diagnoses_are_codes_the_diagnosis_gives():
    from cpython_perf.check import external
    from cpython_perf.matrix import STOCK_DIAGNOSES
    codes = {external.NO_TRAMPOLINE, external.NO_BACKEND, external.NO_FRAME_POINTERS, external.PERF_TOO_OLD}
    assert set(STOCK_DIAGNOSES) == codes and set(generated_tables.DIAGNOSIS_TEXT) == codes


@pytest.mark.parametrize("text", ["no markers", f"{generated_tables.END}\n{generated_tables.BEGIN}",
                                  f"{generated_tables.BEGIN}\n{generated_tables.BEGIN}\n{generated_tables.END}"])
def test_a_page_without_its_markers_is_an_error_naming_it(text):
    with pytest.raises(DriverError, match=r"README\.md: no variant table to generate: put the lines"):
        generated_tables.with_table(text, "table", "README.md")


def test_the_defect_list_has_each_carried_defect_with_its_meaning_and_carriers():
    text = generated_tables.defect_list(MATRIX)
    carried = {d for t in MATRIX.stock.values() for d in t.defects}
    for defect in MATRIX.defects.values():
        assert (f"(`{defect.id}`;" in text) == (defect.id in carried)
    sid = next(line for line in text.splitlines() if "(`gh-146522`;" in line)
    assert MATRIX.defects["gh-146522"].means in sid and "`stock-sid-3.15`" in sid
