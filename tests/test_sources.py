from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from cpython_perf import sources
from cpython_perf.errors import HashMismatch, SourceUnavailable
from cpython_perf.matrix import load_matrix

from .conftest import dedent

PAYLOAD = b"not really a tarball, but bytes with a known hash\n" * 100


def recipe_for(payload: bytes, **changes):
    base = load_matrix().cell("3.12-fp").recipe
    return replace(base, sha256=hashlib.sha256(payload).hexdigest(), size=len(payload), **changes)


@pytest.fixture
def loopback_python_org(tmp_path, monkeypatch):
    """A real HTTP server on 127.0.0.1 laid out like python.org/ftp/python."""
    root = tmp_path / "www"
    (root / "3.12.14").mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(sources.MIRROR_ENV, f"http://127.0.0.1:{server.server_port}")
    yield root / "3.12.14"
    server.shutdown()


def test_download_is_verified_and_cached(tmp_path, loopback_python_org):
    (loopback_python_org / "Python-3.12.14.tar.xz").write_bytes(PAYLOAD)
    cache = tmp_path / "cache"
    path = sources.fetch_source(recipe_for(PAYLOAD), cache, log=lambda *_: None)
    assert path == cache / "Python-3.12.14.tar.xz"
    assert path.read_bytes() == PAYLOAD
    # second time: from the cache, even with the server's file gone
    (loopback_python_org / "Python-3.12.14.tar.xz").unlink()
    assert sources.fetch_source(recipe_for(PAYLOAD), cache, log=lambda *_: None) == path


def test_download_with_wrong_hash_leaves_nothing(tmp_path, loopback_python_org):
    (loopback_python_org / "Python-3.12.14.tar.xz").write_bytes(b"tampered" + PAYLOAD)
    cache = tmp_path / "cache"
    recipe = recipe_for(PAYLOAD)
    with pytest.raises(HashMismatch) as info:
        sources.fetch_source(recipe, cache, log=lambda *_: None)
    message = str(info.value)
    assert recipe.sha256 in message
    assert hashlib.sha256(b"tampered" + PAYLOAD).hexdigest() in message
    assert list(cache.iterdir()) == [], "a bad download was left in the cache"


def test_corrupt_cache_entry_is_deleted(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "Python-3.12.14.tar.xz").write_bytes(b"corrupt")
    recipe = recipe_for(PAYLOAD)
    with pytest.raises(HashMismatch, match=hashlib.sha256(b"corrupt").hexdigest()):
        sources.fetch_source(recipe, cache, log=lambda *_: None)
    assert not (cache / "Python-3.12.14.tar.xz").exists()


def test_unreachable_source_says_how_to_provide_it(tmp_path, monkeypatch):
    monkeypatch.setenv(sources.MIRROR_ENV, "http://127.0.0.1:9")  # discard port: connection refused
    cache = tmp_path / "cache"
    recipe = recipe_for(PAYLOAD)
    with pytest.raises(SourceUnavailable) as info:
        sources.fetch_source(recipe, cache, log=lambda *_: None)
    message = str(info.value)
    assert "CPython 3.12.14" in message and "not reachable" in message
    assert str(cache) in message and sources.CACHE_ENV in message
    assert recipe.sha256 in message
    assert "no Debian source package mirrors 3.12.14" in message
    assert list(cache.iterdir()) == []


def test_machine_archive_entry_from_deb822(tmp_path):
    f = tmp_path / "debian.sources"
    f.write_text(dedent("""
        Types: deb
        URIs: http://security.example/debian-security
        Suites: bookworm-security
        Components: main

        Types: deb
        # comment
        URIs: http://archive.example/debian
        Suites: bookworm bookworm-updates
        Components: main
        Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
        """))
    entry = sources.machine_archive_entry([f])
    assert entry == {"uri": "http://archive.example/debian",
                     "signed_by": "/usr/share/keyrings/debian-archive-keyring.gpg"}
    stanza = sources.deb_src_stanza("trixie", entry)
    assert "Types: deb-src" in stanza and "Suites: trixie" in stanza


def test_machine_archive_entry_from_one_line_format(tmp_path):
    f = tmp_path / "sources.list"
    f.write_text("deb [arch=amd64 signed-by=/k.gpg] http://archive.example/debian bookworm main\n")
    assert sources.machine_archive_entry([f]) == {"uri": "http://archive.example/debian", "signed_by": "/k.gpg"}


def test_recipes_name_their_python_org_file():
    for cell in load_matrix().cells.values():
        assert cell.recipe.url.endswith("/" + cell.recipe.filename)
        assert cell.recipe.filename.startswith(f"Python-{cell.recipe.version}.")
