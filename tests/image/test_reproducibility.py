"""The reproducibility check's pieces (cpython_perf.image.reproducibility), without Docker: the varied build's Dockerfile,
the comparison of two unpacked trees and the known differences.  The check itself builds a cell twice:
nox -s reproducibility-<cell> (minutes)."""

from __future__ import annotations

import os
from pathlib import Path

from cpython_perf.image import pipeline, render, reproducibility
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()


def _inputs(name="3.9-fp"):
    return pipeline.cell_inputs(MATRIX.cell(name), MATRIX.base_suite, log=lambda *_: None, matrix=MATRIX, fetch=False)


def test_the_default_dockerfile_is_unchanged_by_the_variation_hook():
    inputs = _inputs()
    text = inputs.dockerfile("d")
    assert "RUN TARBALL=" in text and " /build/build-cpython.sh /build /usr/src \\\n" in text
    assert "umask" not in text


def test_the_varied_dockerfile_changes_only_the_build_command():
    inputs = _inputs()
    plain = inputs.dockerfile("d").splitlines()
    varied = inputs.dockerfile("d", reproducibility.VARIATION).splitlines()
    changed = [(a, b) for a, b in zip(plain, varied) if a != b]
    assert len(plain) == len(varied) and len(changed) == 1
    assert changed[0][1] == changed[0][0].replace("RUN ", "RUN " + reproducibility.VARIATION.prefix, 1)
    other = render.BuildVariation("", reproducibility.OTHER_BUILD_PATH)
    assert f"/build/build-cpython.sh /build {reproducibility.OTHER_BUILD_PATH} " in inputs.dockerfile("d", other)


def _tree(root: Path, files: dict[str, bytes], mtime: int = 1000) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for path in [root, *root.rglob("*")]:
        os.utime(path, (mtime, mtime))
    return root


def test_identical_trees_have_the_same_canonical_tar_and_no_difference(tmp_path):
    a = _tree(tmp_path / "a", {"bin/python3": b"elf", "lib/x.py": b"x = 1\n"})
    b = _tree(tmp_path / "b", {"lib/x.py": b"x = 1\n", "bin/python3": b"elf"})   # made in another order
    assert reproducibility.canonical_tar_sha256(a) == reproducibility.canonical_tar_sha256(b)
    assert reproducibility.compare(reproducibility.listing(a), reproducibility.listing(b)) == []


def test_contents_mode_and_mtime_differences_are_each_named(tmp_path):
    a = _tree(tmp_path / "a", {"lib/x.py": b"x = 1\n", "lib/y.py": b"", "lib/only-a": b""})
    b = _tree(tmp_path / "b", {"lib/x.py": b"x = 2\n", "lib/y.py": b""})
    (b / "lib" / "y.py").chmod(0o664)
    os.utime(b / "lib", (2000, 2000))
    assert reproducibility.canonical_tar_sha256(a) != reproducibility.canonical_tar_sha256(b)
    found = {d["path"]: d["what"] for d in reproducibility.compare(reproducibility.listing(a),
                                                                    reproducibility.listing(b))}
    assert found == {"lib": ["mtime"], "lib/only-a": ["only in a"], "lib/x.py": ["contents"], "lib/y.py": ["mode"]}


def test_known_differences_have_reasons_and_others_do_not():
    sysconfigdata = "lib/python3.9/_sysconfigdata__linux_x86_64-linux-gnu.py"
    assert "build directory" in reproducibility.known_reason(sysconfigdata, other_build_path=True)
    assert reproducibility.known_reason(sysconfigdata) is None     # the same build directory: no excuse
    assert reproducibility.known_reason("lib/python3.9/os.py") is None
    assert reproducibility.known_reason("bin/python3.9") is None


def test_diffoscope_explains_one_file_of_each_kind_first():
    differences = [{"path": f"lib/python3.9/__pycache__/m{i}.pyc", "what": ["contents"]} for i in range(100)]
    differences += [{"path": "bin/python3.9", "what": ["contents", "mtime"]},
                    {"path": "lib/python3.9/x.py", "what": ["mtime"]},
                    {"path": "lib/python3.9/lib-dynload/_json.so", "what": ["contents"]}]
    chosen = reproducibility.diffoscope_selection(differences, limit=5)
    assert chosen[:3] == ["lib/python3.9/__pycache__/m0.pyc", "bin/python3.9", "lib/python3.9/lib-dynload/_json.so"]
    assert len(chosen) == 5 and "lib/python3.9/x.py" not in chosen


class _FakeAPI:
    """The engine's image store as far as remove_own_images sees it: chains (top first), tags, removals."""

    def __init__(self, chains: dict[str, list[str]], tags: dict[str, list[str]]):
        self.chains, self.tags, self.removed = chains, tags, []

    def history(self, ref):
        return [{"Id": i} for i in self.chains[ref]] + [{"Id": "<missing>"}]

    def remove_image(self, ref, noprune=False):
        assert noprune, "a removal that prunes parents could take images this check did not make"
        self.removed.append(ref)

    def inspect_image(self, image_id):
        return {"RepoTags": self.tags.get(image_id, [])}


def test_cleanup_removes_only_what_the_check_made():
    """The cell's own image (made before the check, untagged meanwhile by someone else) stays."""
    import types

    api = _FakeAPI({"repro:a": ["sha256:sbom-a", "sha256:cell-top", "sha256:cell-run"],
                    "repro:b": ["sha256:sbom-b", "sha256:b-label", "sha256:b-run", "sha256:copy"]},
                   {"sha256:copy": []})
    client = types.SimpleNamespace(api=api)
    existing = {"sha256:cell-top", "sha256:cell-run", "sha256:copy"}
    removed = reproducibility.remove_own_images(client, ["repro:a", "repro:b"], existing)
    assert removed == ["sha256:b-label", "sha256:b-run"]
    assert api.removed == ["repro:a", "repro:b", "sha256:b-label", "sha256:b-run"]
    assert not {"sha256:cell-top", "sha256:cell-run", "sha256:copy"} & set(api.removed)


def test_the_unpacked_tree_keeps_its_own_modification_time(tmp_path):
    """The tree's top directory is compared too: unpacking must not give it the time of the unpacking."""
    import tarfile

    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as tar:
        for name, kind in (("cpython", tarfile.DIRTYPE), ("cpython/bin", tarfile.DIRTYPE)):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, 0o755, 1613741686
            tar.addfile(info)
    reproducibility.unpack_tree(archive, tmp_path / "a")
    assert int((tmp_path / "a").stat().st_mtime) == 1613741686
    assert int((tmp_path / "a" / "bin").stat().st_mtime) == 1613741686
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "a.tar"]   # no staging directory left
