"""Unit tests of cpython_perf.check.external (diagnosis of an external target) and its report section (no Docker).

The facts below are what the probes answered in the stock Debian images (python3.11 3.11.2-6+deb12u8 with
bookworm-backports' linux-perf, python3.13 3.13.5 of trixie), trimmed."""

from __future__ import annotations

import copy
import textwrap

import pytest

from cpython_perf.check import external
from cpython_perf.report import external_targets, html_page, junit_results, markdown_page, model
from cpython_perf.check.external import Evidence, ExternalTarget, PerfFacts, TargetFacts
from cpython_perf.matrix import load_matrix
from cpython_perf.record import perf_runs

from tests.report.junit_files import case, junit

STOCK_311 = {
    "version": [3, 11, 2], "sys_api": False,
    "activation": {"perf": "sys.activate_stack_trampoline does not exist",
                   "perf_jit": "sys.activate_stack_trampoline does not exist"},
    "xoption": {"perf": {"exit": 0, "file": "/tmp/perf-7.map", "exists": False, "bytes": 0, "python_entries": 0},
                "perf_jit": {"exit": 0, "file": "/tmp/jit-8.dump", "exists": False, "bytes": 0, "python_entries": 0}},
    "config": {"PY_HAVE_PERF_TRAMPOLINE": None,
               "CFLAGS": "-Wsign-compare -DNDEBUG -g -fwrapv -O2 -Wall -g -fstack-protector-strong",
               "PY_CFLAGS": "-Wsign-compare -DNDEBUG -g -fwrapv -O2 -Wall -g -fstack-protector-strong"},
    "mapped": ["/usr/bin/python3.11"],
}
STOCK_313 = {
    "version": [3, 13, 5], "sys_api": True,
    "activation": {"perf": "ok", "perf_jit": "ValueError: invalid backend: perf_jit"},
    "xoption": {"perf": {"exit": 0, "file": "/tmp/perf-9.map", "exists": True, "bytes": 12037, "python_entries": 195},
                "perf_jit": {"exit": 0, "file": "/tmp/jit-10.dump", "exists": True, "bytes": 44837,
                             "python_entries": 195}},
    "config": {"PY_HAVE_PERF_TRAMPOLINE": 1, "CFLAGS": "-fno-strict-overflow -Wsign-compare -DNDEBUG -g -O2 -Wall",
               "PY_CFLAGS_NODIST": "-g -fstack-protector -fstack-clash-protection -fcf-protection -g -fwrapv -O2"},
    "mapped": ["/usr/bin/python3.13"],
}
NO_FP_PROLOGUE = textwrap.dedent("""\
    /usr/bin/python3.13:     file format elf64-x86-64

    Disassembly of section .text:

    00000000001d8a20 <_PyEval_EvalFrameDefault@@Base>:
      1d8a20:	endbr64
      1d8a24:	push   %r15
      1d8a26:	push   %r14
      1d8a28:	push   %r13
      1d8a2a:	push   %r12
      1d8a2c:	push   %rbp
      1d8a2d:	push   %rbx
      1d8a2e:	sub    $0x138,%rsp
    """)
FP_PROLOGUE = textwrap.dedent("""\
    00000000002a1b40 <_PyEval_EvalFrameDefault>:
      2a1b40:	push   %rbp
      2a1b41:	mov    %rsp,%rbp
      2a1b44:	push   %r15
      2a1b46:	sub    $0x1a8,%rsp
    """)
PERF_612 = PerfFacts("perf", (6, 12), "6.12.95")


def facts(python, perf=PERF_612, fp=False, frame_bytes=312, **kw) -> TargetFacts:
    loop = external.EvalLoopFacts("/usr/bin/python3", fp, ["endbr64", "push   %r15", "push   %r14"], frame_bytes)
    return TargetFacts(copy.deepcopy(python), perf, capability="PERFMON", eval_loop=loop, **kw)


def codes(reasons):
    return [r.code for r in reasons]


def test_target_name_and_claims():
    target = ExternalTarget("debian-python:bookworm", "/usr/bin/python3.11", ("perf", "perf_jit"))
    assert target.name == "debian-python-bookworm-usr-bin-python3.11"
    assert target.expects("perf") and target.backends == ("perf", "perf_jit")
    unclaimed = ExternalTarget("img", "/usr/bin/python3")
    assert not unclaimed.expects("perf") and unclaimed.backends == ("perf", "perf_jit")
    assert unclaimed.modes == ("perf", "perf_jit") and not unclaimed.foreign and not unclaimed.vanilla
    assert external.results_junit("results", "img:x", "/usr/bin/python3").as_posix() == \
        "results/external-img-x-usr-bin-python3/junit.xml"


def test_parse_modes():
    assert external.parse_modes(None) is None
    assert external.parse_modes("perf,perf_jit") == ("perf", "perf_jit")
    assert external.parse_modes("perf") == ("perf",)
    with pytest.raises(ValueError, match="perf_jitt"):
        external.parse_modes("perf,perf_jitt")


def test_perf_candidates_debian_wrapper_refusing_the_kernel():
    """A Debian perf wrapper that runs perf_<running kernel X.Y> refuses another kernel: the versioned perf answers."""
    out = external.parse_perf_candidates(
        "perf\t1\tE: linux-perf-6.18 is not installed.\n/usr/bin/perf_6.1\t0\tperf version 6.1.135\n")
    assert out.command == "/usr/bin/perf_6.1" and out.version == (6, 1) and out.version_text == "6.1.135"
    assert "linux-perf-6.18 is not installed" in out.notes[0]
    assert external.parse_perf_candidates("perf\t0\tperf version 6.12.95\n") == PerfFacts("perf", (6, 12), "6.12.95")
    none = external.parse_perf_candidates("perf\tmissing\t\n")
    assert none.command is None


def test_prologue_and_symbol_table():
    fp, head = external.prologue_sets_frame_pointer(NO_FP_PROLOGUE)
    assert fp is False and head[:2] == ["endbr64", "push   %r15"]
    assert external.prologue_sets_frame_pointer(FP_PROLOGUE)[0] is True
    assert external.prologue_sets_frame_pointer("no code")[0] is None
    arm = "  4a0c0:\tstp\tx29, x30, [sp, #-96]!\n  4a0c4:\tmov\tx29, sp\n"
    assert external.prologue_sets_frame_pointer(arm)[0] is True
    dynsym = ("00000000001d8a20 g    DF .text\t000000000000c6d5  Base        _PyEval_EvalFrameDefault\n"
              "0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.2.5) free\n")
    assert external.symbol_address(dynsym) == 0x1d8a20
    assert external.symbol_address("00000000001d8a20 g    DO .data 8 Base _PyEval_EvalFrameDefault") is None


def test_cflags_frame_pointers():
    assert external.cflags_frame_pointers(STOCK_313["config"]) is False
    assert external.cflags_frame_pointers({"CFLAGS": "-O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"}) is True
    assert external.cflags_frame_pointers({"CFLAGS": "-fno-omit-frame-pointer", "PY_CFLAGS_NODIST": "-fomit-frame-pointer"}) is False
    assert external.cflags_frame_pointers({}) is None
    # an -O0 build keeps them unless told otherwise; the last -O counts, as for the check scripts' judgement
    assert external.cflags_frame_pointers({"CFLAGS": "-g -O0"}) is True
    assert external.cflags_frame_pointers({"CFLAGS": "-O0", "PY_CFLAGS_NODIST": "-O2"}) is False
    assert external.cflags_frame_pointers({"CFLAGS": "-O0 -fomit-frame-pointer"}) is False
    assert external.optimisation_flags({"CFLAGS": "-O2 -g -fwrapv", "PY_CFLAGS": "-O2 -fwrapv -fcf-protection"}) == \
        ["-O2", "-fwrapv", "-fcf-protection"]


def test_stock_311_has_no_trampoline():
    f = facts(STOCK_311)
    seen = Evidence("xoption", process_samples=262, python_frames=0, failure="py::foo is missing")
    perf = external.diagnose("perf", f, seen)
    assert codes(perf) == ["no-trampoline", "recorded"]
    assert "Python 3.11.2 has no sys.activate_stack_trampoline" in perf[0].text
    assert "-X perf is ignored (wrote no map" in perf[0].text and "PY_HAVE_PERF_TRAMPOLINE=None" in perf[0].text
    assert "0 py:: frames in 262 samples" in perf[1].text
    jit = external.diagnose("perf_jit", f, seen)
    assert codes(jit) == ["backend-not-available", "no-trampoline", "recorded"]
    assert "perf_jit is native from 3.13" in jit[0].text


def test_stock_313_perf_has_no_frame_pointers_and_perf_jit_is_the_way():
    f = facts(STOCK_313)
    perf = external.diagnose("perf", f, Evidence("xoption", process_samples=315, python_frames=0, failure="x"))
    assert codes(perf) == ["no-frame-pointers"]
    text = perf[0].text
    assert text.startswith("no frame pointers in this build, use perf_jit")
    assert "mapped 195 py:: entries" in text and "0 py:: frames in 315 samples" in text
    assert "sets up no frame pointer (endbr64; push   %r15" in text
    assert "lack -fno-omit-frame-pointer" in text and "-fcf-protection" in text
    # 3.13.5 offers perf_jit through -X although its sys API refuses it (gh-141579)
    assert f.offers("perf_jit") and not f.offers_sys_api("perf_jit")
    api = external.diagnose("perf_jit", f, Evidence("sys_api", error="ValueError: invalid backend: perf_jit"))
    assert codes(api) == ["sys-api-refuses"] and "gh-141579" in api[0].text


def test_no_frame_pointer_claim_needs_evidence():
    """A frame-pointer build whose perf recording fails is not blamed on frame pointers: unexplained."""
    built = copy.deepcopy(STOCK_313)
    built["config"]["CFLAGS"] += " -fno-omit-frame-pointer"
    f = facts(built, fp=True)
    got = external.diagnose("perf", f, Evidence("xoption", process_samples=300, python_frames=20,
                                                 failure="chain broken (perf, xoption): 10 of 200"))
    assert codes(got) == ["unexplained"] and "chain broken" in got[0].text
    # an eval loop with a frame pointer of its own in a build without the flag (Debian's 3.14.10): no frame
    # pointers between the trampoline and the eval loop
    own = external.diagnose("perf", facts(STOCK_313, fp=True), Evidence("xoption", process_samples=240,
                                                                         python_frames=240, failure="chain broken"))
    assert codes(own) == ["no-frame-pointers"] and "does not make the rest of the build's" in own[0].text
    # prologue unknown: the CFLAGS decide
    unknown = facts(STOCK_313, fp=None)
    assert codes(external.diagnose("perf", unknown, Evidence(process_samples=9))) == ["no-frame-pointers"]
    # and without perf_jit the advice is a rebuild
    old = copy.deepcopy(STOCK_313)
    old["version"], old["activation"]["perf_jit"] = [3, 12, 3], "ValueError: invalid backend: perf_jit"
    old["xoption"]["perf_jit"] = {"exists": False, "python_entries": 0}
    text = external.diagnose("perf", facts(old), Evidence(process_samples=9))[0].text
    assert "rebuild with -fno-omit-frame-pointer (this version has no perf_jit)" in text


def test_perf_too_old_for_perf_jit():
    f = facts(STOCK_313, perf=PerfFacts("/usr/bin/perf_6.1", (6, 1), "6.1.135"))
    got = external.diagnose("perf_jit", f, Evidence("xoption", error="perf inject: failed"))
    assert codes(got) == ["perf-too-old", "recording-failed"]
    assert "perf_6.1 is 6.1, perf_jit needs >= 6.8" in got[0].text


def test_perf_script_without_addr2line():
    """bookworm's perf 6.1 runs addr2line for dwarf call chains: without binutils perf script dies (exit 141)."""
    f = facts(STOCK_311, perf=PerfFacts("perf", (6, 1), "6.1.176"))
    error = ("addr2line /usr/lib/x86_64-linux-gnu/libc.so.6: could not read first record\n"
             "addr2line /usr/bin/python3.11: could not read first record\n")
    got = external.diagnose("perf_jit", f, Evidence("xoption", error=error))
    assert codes(got) == ["backend-not-available", "no-trampoline", "perf-too-old", "perf-needs-addr2line"]
    assert "install binutils" in got[-1].text


def test_blockers_no_perf_and_not_permitted():
    none = facts(STOCK_313, perf=PerfFacts(None, notes=["`perf version` answered (exit 1): E: linux-perf-6.18 is not installed."]))
    got = external.blockers("perf", none)
    assert codes(got) == ["no-perf"] and "linux-perf-6.18 is not installed" in got[0].text
    refused = facts(STOCK_313)
    refused.capability, refused.refusal = None, "perf cannot sample inside the container: perf_event_open was refused."
    assert codes(external.blockers("perf_jit", refused)) == ["perf-not-permitted"]
    assert codes(external.diagnose("perf_jit", refused, Evidence())) == ["perf-not-permitted"]
    assert external.blockers("perf", facts(STOCK_313)) == []


def test_error_summary_skips_perf_progress_and_carets():
    text = ("Traceback (most recent call last):\n  File \"<string>\", line 1\n    ~~~~^^^^\n"
            "ValueError: invalid backend: perf_jit\n[ perf record: Woken up 2 times to write data ]\n")
    assert external.error_summary(text) == 'File "<string>", line 1 / ValueError: invalid backend: perf_jit'


def test_check_skip_reason():
    unclaimed = ExternalTarget("img", "/usr/bin/python3.11")
    reason = external.check_skip_reason(unclaimed, {"perf", "perf_jit"}, facts(STOCK_311))
    assert "does not offer the perf, perf_jit backend(s)" in reason
    assert external.check_skip_reason(unclaimed, {"perf_jit"}, facts(STOCK_313)) is None   # -X perf_jit works
    claimed = ExternalTarget("img", "/usr/bin/python3.11", ("perf", "perf_jit"))
    assert external.check_skip_reason(claimed, {"perf"}, facts(STOCK_311)) is None   # claimed: run, and fail


def test_target_facts_properties():
    props = facts(STOCK_313).properties()
    assert props["python_version"] == "3.13.5" and props["perf_version"] == "6.12.95"
    assert props["cflags_frame_pointers"] == "False" and props["eval_frame_pointer"] == "False"


def test_stock_image_tag_and_packages():
    assert external.stock_image_tag("trixie", "python3.13") == "cpython-perf-stock:trixie-python3.13"
    assert external.stock_image_tag("bookworm", "python3.11", "bookworm-backports") == \
        "cpython-perf-stock:bookworm-python3.11-perf-bookworm-backports"
    assert external.stock_image_packages("python3.11", "bookworm-backports", "bookworm") == \
        ["python3.11", "linux-perf/bookworm-backports"]
    assert external.stock_image_packages("python3.13", None, "trixie") == ["python3.13", "linux-perf"]


# --------------------------------------------------------------------------
# The report's section


def ext_props(image, python, mode, **kw):
    return {"external_image": image, "external_python": python, "mode": mode, "python_version": "3.13.5",
            "perf_version": "6.12.95", **kw}


SKIP_NO_FP = ('<skipped type="pytest.skip" message="perf does not work with /usr/bin/python3.13 in stock:trixie: '
              'no frame pointers in this build, use perf_jit">x</skipped>')
FAIL_EXPECTED = '<failure message="perf_jit does not work with /usr/bin/python3.11 in deb:bookworm: no trampoline">t</failure>'


def test_report_external_section(tmp_path):
    cls = "conformance.test_external"
    junit(tmp_path / "external-stock-trixie" / "junit.xml", "\n".join([
        case("test_perf_mode[stock-trixie-usr-bin-python3.13-perf]", cls=cls, body=SKIP_NO_FP, time="12.5",
             props=ext_props("stock:trixie", "/usr/bin/python3.13", "perf",
                             external_reason="no frame pointers in this build, use perf_jit")),
        case("test_perf_mode[stock-trixie-usr-bin-python3.13-perf_jit]", cls=cls, time="150.0",
             props=ext_props("stock:trixie", "/usr/bin/python3.13", "perf_jit",
                             external_caveat="not with sys_api: refused (gh-141579)")),
        case("test_check_script[stock-trixie-usr-bin-python3.13-check_sys_api]", cls="conformance.test_checks",
             props={"external_image": "stock:trixie", "external_python": "/usr/bin/python3.13"}),
        case("test_check_script[stock-trixie-usr-bin-python3.13-check_fix_perf_jit_sys_api]",
             cls="conformance.test_checks", body='<failure message="defect">t</failure>',
             props={"external_image": "stock:trixie", "external_python": "/usr/bin/python3.13"}),
    ]))
    junit(tmp_path / "external-deb" / "junit.xml", case(
        "test_perf_mode[deb-bookworm-usr-bin-python3.11-perf_jit]", cls=cls, body=FAIL_EXPECTED,
        props=ext_props("deb:bookworm", "/usr/bin/python3.11", "perf_jit", expected="True")))
    built = model.build_report(load_matrix(), junit_results.latest_results(tmp_path))
    assert not built.unbound and all(not cells for cells in built.grid.values())
    rows = external_targets.external_rows(built)
    assert [(r.image, r.mode, r.outcome) for r in rows] == [
        ("deb:bookworm", "perf_jit", "does not work (expected: FAIL)"),
        ("stock:trixie", "perf", "does not work"),
        ("stock:trixie", "perf_jit", "works (caveat)"),
    ]
    assert rows[0].reason == "no trampoline"   # from the failure message, its prefix cut
    md = markdown_page.render_markdown(built)
    assert "## External interpreters" in md
    assert ("| stock:trixie | /usr/bin/python3.13 | 3.13.5 | 6.12.95 | perf | does not work | "
            "no frame pointers in this build, use perf_jit | 12.5 |") in md
    assert "- stock:trixie /usr/bin/python3.13: 1 pass, 1 FAIL (failed: check_fix_perf_jit_sys_api)" in md
    page = html_page.render_html(built)
    assert "<h2>External interpreters</h2>" in page and "works (caveat)" in page


XFAIL_PRESENT = ('<skipped type="pytest.xfail" message="present in 3.14.10: gh-146522: Repeated activations fail. '
                 'Activate it once.">x</skipped>')


def test_report_lists_the_defects_a_stock_interpreter_carries_and_its_jit_rows(tmp_path):
    cls = "conformance.test_external"
    stock = {"external_image": "cpython-perf-stock:sid-python3.14", "external_python": "/usr/bin/python3.14"}
    junit(tmp_path / "external-sid" / "junit.xml", "\n".join([
        case("test_perf_mode[sid-perf_jit]", cls=cls, time="9.0",
             props=ext_props(stock["external_image"], stock["external_python"], "perf_jit")),
        case("test_perf_mode[sid-perf_jit-jit]", cls=cls, time="2.0",
             body='<skipped type="pytest.skip" message="perf_jit with PYTHON_JIT=1: excluded">x</skipped>',
             props={**ext_props(stock["external_image"], stock["external_python"], "perf_jit"), "jit": "True",
                    "external_reason": "the experimental JIT and the perf trampoline exclude each other"}),
        *(case(f"test_check_script[sid-{name}]", cls="conformance.test_checks", body=XFAIL_PRESENT,
               props={**stock, "defect_present": "gh-146522"}) for name in ("check_activate_cycles", "check_switch_stress")),
    ]))
    built = model.build_report(load_matrix(), junit_results.latest_results(tmp_path))
    rows = external_targets.external_rows(built)
    assert [(r.mode, r.outcome) for r in rows] == [("perf_jit", "works"), ("perf_jit (PYTHON_JIT=1)", "does not work")]
    assert external_targets.external_defects(built) == {
        (stock["external_image"], stock["external_python"]):
            [("gh-146522", "present in 3.14.10: gh-146522: Repeated activations fail. Activate it once.")]}
    md = markdown_page.render_markdown(built)
    assert "Defects of /usr/bin/python3.14 in cpython-perf-stock:sid-python3.14 (each seen by a check):" in md
    assert md.count("- present in 3.14.10: gh-146522") == 1
    assert "present in 3.14.10: gh-146522" in html_page.render_html(built)


def test_report_without_external_results_has_no_section(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    built = model.build_report(load_matrix(), junit_results.latest_results(tmp_path))
    assert "External interpreters" not in markdown_page.render_markdown(built)
    assert "External interpreters" not in html_page.render_html(built)


def test_an_external_target_records_perf_jit_as_a_cell_of_the_host_does():
    """perf_runs reads a cell's arch facts (the perf_arch rename of dwarf recordings): an external target, run in
    this host's Docker, has the host's, and its perf_jit recording script is made (was AttributeError)."""
    target = ExternalTarget("debian-python:trixie", "/usr/bin/python3.13", ("perf", "perf_jit"))
    shell = perf_runs.perf_run(target, "perf_jit", python=target.python).shell
    assert "perf inject -i /src/perf.data --jit" in shell and "set-arch" not in shell
