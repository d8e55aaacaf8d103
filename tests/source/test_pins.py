"""`python -m cpython_perf pin`: choosing releases, rewriting recipes, --check, offline (cpython_perf/source/pins.py).

The network is injected: a dict stands for python.org's listings, a loopback HTTP server for its downloads
(the 3.13.5 tarball and its real OpenPGP signature), a closed loopback port for a machine that cannot reach
python.org.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import socket
import threading
import urllib.error

import pytest

from cpython_perf import cli
from cpython_perf.source import pins, signatures, sources
from cpython_perf.errors import MatrixError
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

from ..conftest import edit, line_of
from .test_signatures import release_3135  # noqa: F401  (the real 3.13.5 tarball and .asc, or a skip)

BASE = "https://www.python.org/ftp/python"
RELEASES = PROJECT_ROOT / "tests" / "data" / "releases-2026-11-23.yaml"


def listing(*names: str) -> str:
    """A directory listing page as python.org serves one (nginx autoindex)."""
    rows = "\n".join(f'<a href="{n}">{n}</a>                 23-Nov-2026 10:00   -' for n in names)
    return f'<html><head><title>Index of /ftp/python/</title></head><body><pre><a href="../">../</a>\n{rows}\n</pre></body></html>'


TREE = {
    f"{BASE}/": listing("3.14.9/", "3.14.10/", "3.15.0/", "3.15.1/", "3.15.2/", "3.16.0/", "3.9.2/", "doc/",
                        "3.1.5/", "index-windows.json"),
    f"{BASE}/3.14.9/": listing("Python-3.14.9.tar.xz", "Python-3.14.9.tgz"),
    f"{BASE}/3.14.10/": listing("Python-3.14.10.tar.xz", "Python-3.14.10.tar.xz.sigstore", "Python-3.14.10.tgz"),
    f"{BASE}/3.15.0/": listing(*(f"Python-3.15.0{p}.tar.xz" for p in ("a1", "a7", "b1", "b4", "rc1", "rc2", "")),
                               "Python-3.15.0.tar.xz.sigstore"),
    f"{BASE}/3.15.1/": listing("Python-3.15.1.tar.xz", "Python-3.15.1.tgz", "Python-3.15.1.tar.xz.sigstore"),
    f"{BASE}/3.15.2/": listing("Python-3.15.2rc1.tar.xz", "Python-3.15.2rc1.tgz"),
    f"{BASE}/3.16.0/": listing("Python-3.16.0a1.tar.xz", "Python-3.16.0a2.tar.xz"),
}


def fake_python_org(tree=TREE, asked=None):
    def fetch_text(url):
        if asked is not None:
            asked.append(url)
        if url not in tree:
            raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)
        return tree[url]
    return pins.PythonOrg(BASE, fetch_text=fetch_text, download=lambda url, dest: pytest.fail("no download expected"))


# --------------------------------------------------------------------------
# release numbers and the choice of the newest


def test_release_order():
    order = ["3.15.0a1", "3.15.0a7", "3.15.0b1", "3.15.0b4", "3.15.0rc1", "3.15.0rc2", "3.15.0", "3.15.1rc1",
             "3.15.1", "3.15.10"]
    assert sorted(reversed(order), key=pins.release_key) == order
    assert [pins.is_prerelease(v) for v in ("3.15.0b1", "3.15.0rc2", "3.15.0a1", "3.15.0", "3.9.2")] == \
        [True, True, True, False, False]
    with pytest.raises(ValueError):
        pins.release_key("3.15")


def test_listing_parsing():
    assert pins.release_dirs(TREE[f"{BASE}/"], "3.15") == ["3.15.2", "3.15.1", "3.15.0"]
    assert pins.release_dirs(TREE[f"{BASE}/"], "3.1") == ["3.1.5"]       # not 3.14.x / 3.15.x / 3.16.x
    assert pins.release_dirs(TREE[f"{BASE}/"], "3.14") == ["3.14.10", "3.14.9"]
    assert pins.tarballs_in(TREE[f"{BASE}/3.15.0/"], "3.15.0")[:3] == ["3.15.0", "3.15.0rc2", "3.15.0rc1"]
    assert pins.tarballs_in(TREE[f"{BASE}/3.15.2/"], "3.15.2") == ["3.15.2rc1"]


def test_newest_final_release_skips_pre_releases():
    asked = []
    org = fake_python_org(asked=asked)
    newest = org.newest("3.15", allow_prerelease=False)
    assert newest.version == "3.15.1"                # 3.15.2/ holds only rc1
    assert newest.url == f"{BASE}/3.15.1/Python-3.15.1.tar.xz"
    assert asked == [f"{BASE}/", f"{BASE}/3.15.2/", f"{BASE}/3.15.1/"]     # stops at the first final release
    assert org.newest("3.15", allow_prerelease=True).version == "3.15.2rc1"
    assert org.newest("3.14", allow_prerelease=False).version == "3.14.10"  # 3.14.10 > 3.14.9, not by text
    assert org.newest("3.16", allow_prerelease=False) is None
    assert org.newest("3.16", allow_prerelease=True).version == "3.16.0a2"
    assert org.newest("3.16", True).url == f"{BASE}/3.16.0/Python-3.16.0a2.tar.xz"


# --------------------------------------------------------------------------
# offline


def test_offline_is_a_clear_error():
    def unreachable(url):
        raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))
    org = pins.PythonOrg(BASE, fetch_text=unreachable)
    with pytest.raises(pins.Offline) as info:
        org.newest("3.15", False)
    message = str(info.value)
    assert message.startswith("python.org cannot be reached from this machine (https://www.python.org/ftp/python/:")
    assert "nothing was changed" in message and "--releases-from" in message
    assert info.value.exit_code == pins.EXIT_OFFLINE == 3


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args", [["pin", "--check"], ["pin", "3.15"], ["pin"]])
def test_offline_command_exits_3_and_changes_nothing(project_copy, monkeypatch, capsys, args):
    monkeypatch.setenv(sources.MIRROR_ENV, f"http://127.0.0.1:{closed_port()}")   # nothing listens there
    before = {p.name: p.read_bytes() for p in (project_copy / "recipes").iterdir()}
    status = cli.main(["--matrix", str(project_copy / "matrix.yaml"), *args])
    out, err = capsys.readouterr()
    assert status == 3, (out, err)
    assert err.startswith("error: python.org cannot be reached from this machine (http://127.0.0.1:")
    assert "Traceback" not in out + err
    assert {p.name: p.read_bytes() for p in (project_copy / "recipes").iterdir()} == before


# --------------------------------------------------------------------------
# the recipe, rewritten as text


def test_rewrite_keeps_comments_and_loads(tmp_path):
    original = (PROJECT_ROOT / "recipes" / "3.15.yaml").read_text()
    text = pins.rewrite_recipe(original, "3.15.2", f"{BASE}/3.15.2/Python-3.15.2.tar.xz", "8b" * 32, 27960396)
    old_lines, new_lines = original.splitlines(), text.splitlines()
    assert [l for l in old_lines if l.startswith("#")] == [l for l in new_lines if l.startswith("#")]
    assert [l for l in old_lines if l.startswith(("debian:", "configure:"))] == \
        [l for l in new_lines if l.startswith(("debian:", "configure:"))]
    assert len(old_lines) == len(new_lines)
    assert "version: 3.15.2\n" in text and "sha256: " + "8b" * 32 + "\n" in text and "size: 27960396\n" in text
    path = tmp_path / "3.15.yaml"
    path.write_text(text)
    from cpython_perf.matrix import load_recipe
    recipe = load_recipe(path, "3.15")
    assert (recipe.version, recipe.size, recipe.filename) == ("3.15.2", 27960396, "Python-3.15.2.tar.xz")


def test_rewrite_keeps_an_inline_comment_and_adds_a_missing_size():
    text = "# head\nversion: 3.12.14  # keep me\nurl: x\nsha256: 00  # old note\ndebian: null\n"
    new = pins.rewrite_recipe(text, "3.12.15", "y", "11", None, note="checked")
    assert new == "# head\nversion: 3.12.15  # keep me\nurl: y\nsha256: 11   # checked\nsize: null\ndebian: null\n"
    with pytest.raises(pins.PinError, match="no top-level sha256"):
        pins.rewrite_recipe("version: 1\nurl: 2\n", "3.15.0", "u", "00", None)


# --------------------------------------------------------------------------
# --check and pin with release data gathered elsewhere (pyenv, Debian's signed indices)


def test_check_lists_every_stale_pin_and_changes_nothing(project_copy, capsys):
    before = {p.name: p.read_bytes() for p in (project_copy / "recipes").iterdir()}
    status = cli.main(["--matrix", str(project_copy / "matrix.yaml"), "pin", "--check", "--releases-from", str(RELEASES)])
    out = capsys.readouterr().out
    assert status == 1
    assert "3.14: pinned 3.14.8, newest 3.14.10 (3.14.yaml)" in out
    assert "3.15: pinned 3.15.0, newest 3.15.2 (3.15.yaml)" in out
    assert "3.12: pinned 3.12.15, the newest final release" in out
    assert "3.13" not in out, "a distro-shipped pin was checked without being named"
    assert "run `python -m cpython_perf pin 3.14 3.15`" in out
    assert {p.name: p.read_bytes() for p in (project_copy / "recipes").iterdir()} == before
    # named, the distro pin is checked too
    assert cli.main(["--matrix", str(project_copy / "matrix.yaml"), "pin", "--check", "3.13", "--releases-from",
                     str(RELEASES)]) == 1
    assert "3.13: pinned 3.13.5, newest 3.13.18" in capsys.readouterr().out


def test_check_passes_when_every_pin_is_newest(project_copy, tmp_path, capsys):
    data = tmp_path / "releases.yaml"
    data.write_text('"3.12.15": {sha256: ' + "c" * 64 + "}\n")
    assert cli.main(["--matrix", str(project_copy / "matrix.yaml"), "pin", "--check", "3.12", "--releases-from",
                     str(data)]) == 0
    assert "every checked pin is the newest release" in capsys.readouterr().out


def test_pin_from_a_releases_file_rewrites_the_recipe(project_copy, capsys):
    recipe = project_copy / "recipes" / "3.15.yaml"
    comments = [l for l in recipe.read_text().splitlines() if l.startswith("#")]
    assert cli.main(["--matrix", str(project_copy / "matrix.yaml"), "pin", "3.15", "--releases-from", str(RELEASES)]) == 0
    text = recipe.read_text()
    assert [l for l in text.splitlines() if l.startswith("#")] == comments
    assert "version: 3.15.2\n" in text and "size: 27960396\n" in text
    assert "signature not checked (python.org not reached" in text      # says how the pin was made
    cell = load_matrix(project_copy / "matrix.yaml").cell("3.15-fp")
    assert cell.recipe.sha256 == "8b5536d280142ecf6cdfe15d12a21ba1c65e300bbf7b28a8d0cdb849575797de"


def test_releases_file_is_validated(project_copy, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text('"3.15.2": {sha256: nothex}\n')
    assert cli.main(["--matrix", str(project_copy / "matrix.yaml"), "pin", "--check", "--releases-from", str(bad)]) == 2
    assert "3.15.2: sha256 must be 64 lower-case hex digits" in capsys.readouterr().err


# --------------------------------------------------------------------------
# pre-releases


def test_no_pin_is_a_pre_release_unless_the_matrix_allows_it():
    matrix = load_matrix()
    for version, recipe in pins.recipes_of(matrix).items():
        assert not pins.is_prerelease(recipe.version) or version in matrix.prerelease_versions, (
            f"{recipe.path.name} pins the pre-release {recipe.version}, which matrix.yaml does not allow for "
            f"{version} (prerelease: true)")


def test_pre_releases_are_chosen_only_where_allowed(project_copy, tmp_path):
    data = tmp_path / "releases.yaml"
    data.write_text('"3.15.2": {sha256: ' + "2" * 64 + '}\n"3.15.3rc1": {sha256: ' + "3" * 64 + "}\n")
    source = pins.ReleasesFile(data)
    pins.pin(load_matrix(project_copy / "matrix.yaml"), ["3.15"], source, log=lambda *_: None)
    assert "version: 3.15.2\n" in (project_copy / "recipes" / "3.15.yaml").read_text()
    edit(project_copy / "matrix.yaml", '    recipe: recipes/3.15.yaml\n', '    recipe: recipes/3.15.yaml\n    prerelease: true\n')
    matrix = load_matrix(project_copy / "matrix.yaml")
    assert matrix.prerelease_versions == {"3.15"}
    pins.pin(matrix, ["3.15"], source, log=lambda *_: None)
    assert "version: 3.15.3rc1\n" in (project_copy / "recipes" / "3.15.yaml").read_text()


def test_a_pre_release_pin_not_allowed_is_reported_by_check(project_copy, capsys):
    edit(project_copy / "recipes" / "3.15.yaml", "version: 3.15.0\nurl: https://www.python.org/ftp/python/3.15.0/Python-3.15.0.tar.xz",
         "version: 3.15.0b1\nurl: https://www.python.org/ftp/python/3.15.0/Python-3.15.0b1.tar.xz")
    assert cli.main(["--matrix", str(project_copy / "matrix.yaml"), "pin", "--check", "3.15", "--releases-from",
                     str(RELEASES)]) == 1
    assert "3.15: pinned 3.15.0b1 is a pre-release, which matrix.yaml does not allow" in capsys.readouterr().out


def test_prerelease_key_is_validated(project_copy):
    edit(project_copy / "matrix.yaml", '    recipe: recipes/3.15.yaml\n', '    recipe: recipes/3.15.yaml\n    prerelease: yes please\n')
    path = project_copy / "matrix.yaml"
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    assert str(info.value).startswith(f"{path}:{line_of(path, 'prerelease: yes please')}:")
    assert "prerelease of 3.15 must be true or false" in str(info.value)


# --------------------------------------------------------------------------
# a whole pin from "python.org": a loopback server with the real 3.13.5 tarball and its real signature


@pytest.fixture
def loopback_python_org(tmp_path, monkeypatch):
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(sources.MIRROR_ENV, f"http://127.0.0.1:{server.server_port}")
    yield root
    server.shutdown()


def stale_313(project_copy):
    """The project copy's 3.13 recipe set back to an older release (3.13.4), as a stale pin."""
    recipe = project_copy / "recipes" / "3.13.yaml"
    text = recipe.read_text().replace("3.13.5", "3.13.4")
    recipe.write_text(text.replace("93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640", "ab" * 32))
    return recipe


def test_pin_downloads_verifies_and_rewrites(project_copy, tmp_path, loopback_python_org, release_3135):
    tarball, asc = release_3135
    (loopback_python_org / "3.13.5").mkdir()
    (loopback_python_org / "3.13.4").mkdir()
    shutil.copy(tarball, loopback_python_org / "3.13.5" / "Python-3.13.5.tar.xz")
    shutil.copy(asc, loopback_python_org / "3.13.5" / "Python-3.13.5.tar.xz.asc")
    (loopback_python_org / "3.13.4" / "Python-3.13.4.tar.xz").write_bytes(b"older")
    recipe = stale_313(project_copy)
    comments = [l for l in recipe.read_text().splitlines() if l.startswith("#")]
    cache, log = tmp_path / "cache", []
    changed = pins.pin(load_matrix(project_copy / "matrix.yaml"), ["3.13"], pins.PythonOrg(), log.append, cache)
    assert changed == ["3.13: 3.13.4 -> 3.13.5 (sha256 93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640, "
                       "22856016 bytes) in 3.13.yaml"]
    said = "\n".join(log)
    assert "OpenPGP signature Python-3.13.5.tar.xz.asc good: Thomas Wouters, key 7169605F62C751356D054A26A821E680E5FA6305" in said
    text = recipe.read_text()
    assert [l for l in text.splitlines() if l.startswith("#")] == comments
    assert "OpenPGP signature checked (Thomas Wouters)" in text
    loaded = load_matrix(project_copy / "matrix.yaml").cell("3.13-fp").recipe
    assert (loaded.version, loaded.size) == ("3.13.5", 22856016)
    assert sorted(p.name for p in cache.iterdir()) == ["Python-3.13.5.tar.xz", "Python-3.13.5.tar.xz.asc"]


def test_pin_refuses_a_bad_signature_and_keeps_nothing(project_copy, tmp_path, loopback_python_org, release_3135):
    tarball, asc = release_3135
    (loopback_python_org / "3.13.5").mkdir()
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0x01                    # one bit of the tarball flipped
    (loopback_python_org / "3.13.5" / "Python-3.13.5.tar.xz").write_bytes(bytes(data))
    shutil.copy(asc, loopback_python_org / "3.13.5" / "Python-3.13.5.tar.xz.asc")
    recipe = stale_313(project_copy)
    before = recipe.read_bytes()
    cache = tmp_path / "cache"
    with pytest.raises(signatures.SignatureError, match="does not verify Python-3.13.5.tar.xz as signed by Thomas Wouters"):
        pins.pin(load_matrix(project_copy / "matrix.yaml"), ["3.13"], pins.PythonOrg(), lambda *_: None, cache)
    assert recipe.read_bytes() == before
    assert list(cache.iterdir()) == []


def test_pin_refuses_a_release_without_signature(project_copy, tmp_path, loopback_python_org):
    (loopback_python_org / "3.13.5").mkdir()
    (loopback_python_org / "3.13.5" / "Python-3.13.5.tar.xz").write_bytes(b"unsigned")
    recipe = stale_313(project_copy)
    before = recipe.read_bytes()
    with pytest.raises(pins.PinError, match="publishes no Python-3.13.5.tar.xz.asc"):
        pins.pin(load_matrix(project_copy / "matrix.yaml"), ["3.13"], pins.PythonOrg(), lambda *_: None,
                 tmp_path / "cache")
    assert recipe.read_bytes() == before


def test_a_named_distro_pin_drops_its_debian_mirror(project_copy, capsys):
    """3.13 is left alone unless named; named, its new pin no longer claims Debian's 3.13.5 tarball."""
    assert cli.main(["--matrix", str(project_copy / "matrix.yaml"), "pin", "--releases-from", str(RELEASES)]) == 0
    assert "version: 3.13.5\n" in (project_copy / "recipes" / "3.13.yaml").read_text()
    capsys.readouterr()
    assert cli.main(["--matrix", str(project_copy / "matrix.yaml"), "pin", "3.13", "--releases-from", str(RELEASES)]) == 0
    assert "which mirrors 3.13.5, not 3.13.18: set to debian: null" in capsys.readouterr().out
    recipe = load_matrix(project_copy / "matrix.yaml").cell("3.13-fp").recipe
    assert (recipe.version, recipe.debian, recipe.size) == ("3.13.18", None, 23243936)
