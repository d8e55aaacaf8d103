from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from cpython_perf.source import sources
from cpython_perf.errors import HashMismatch, SourceUnavailable
from cpython_perf.matrix import load_matrix

from ..conftest import dedent

PAYLOAD = b"not really a tarball, but bytes with a known hash\n" * 100


def recipe_for(payload: bytes, **changes):
    base = load_matrix().cell("3.12-fp").recipe
    return replace(base, sha256=hashlib.sha256(payload).hexdigest(), size=len(payload), **changes)


@pytest.fixture
def loopback_python_org(tmp_path, monkeypatch):
    """A real HTTP server on 127.0.0.1 laid out like python.org/ftp/python."""
    root = tmp_path / "www"
    (root / "3.12.15").mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(sources.MIRROR_ENV, f"http://127.0.0.1:{server.server_port}")
    yield root / "3.12.15"
    server.shutdown()


def test_download_is_verified_and_cached(tmp_path, loopback_python_org):
    (loopback_python_org / "Python-3.12.15.tar.xz").write_bytes(PAYLOAD)
    cache = tmp_path / "cache"
    path = sources.fetch_source(recipe_for(PAYLOAD), cache, log=lambda *_: None)
    assert path == cache / "Python-3.12.15.tar.xz"
    assert path.read_bytes() == PAYLOAD
    # second time: from the cache, even with the server's file gone
    (loopback_python_org / "Python-3.12.15.tar.xz").unlink()
    assert sources.fetch_source(recipe_for(PAYLOAD), cache, log=lambda *_: None) == path


def test_download_with_wrong_hash_leaves_nothing(tmp_path, loopback_python_org):
    (loopback_python_org / "Python-3.12.15.tar.xz").write_bytes(b"tampered" + PAYLOAD)
    cache = tmp_path / "cache"
    recipe = recipe_for(PAYLOAD)
    with pytest.raises(HashMismatch) as info:
        sources.fetch_source(recipe, cache, log=lambda *_: None)
    message = str(info.value)
    assert recipe.sha256 in message
    assert hashlib.sha256(b"tampered" + PAYLOAD).hexdigest() in message
    assert list(cache.iterdir()) == [], "a bad download was left in the cache"


# --------------------------------------------------------------------------
# Falling through: cache -> python.org -> Debian, with the remote fetchers faked (no network)

TARBALL = "Python-3.12.15.tar.xz"
CORRUPT = b"corrupt"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def remotes(monkeypatch, tmp_path):
    """Fake python.org and Debian fetchers: set remotes.gives[name] to the bytes it answers with, or to an
    exception message (the source cannot provide the file).  remotes.calls lists who was asked."""

    class Remotes:
        cache = tmp_path / "cache"
        gives: dict[str, bytes | str] = {}
        calls: list[str] = []
        log: list[str] = []

        def fetcher(self, name):
            def fetch(recipe, tmp, log):
                self.calls.append(name)
                # downloads land in a temporary directory inside the cache, never under the final name
                assert tmp.parent == self.cache and tmp.name.startswith(".fetch-")
                assert not (self.cache / recipe.filename).exists(), "the final name exists while downloading"
                answer = self.gives[name]
                dest = tmp / recipe.filename
                if isinstance(answer, str):
                    dest.write_bytes(PAYLOAD[:10])   # a half-made download, then the failure
                    raise sources._NotHere(answer)
                dest.write_bytes(answer)
                return dest
            return fetch

        def fetch(self, recipe=None):
            return sources.fetch_source(recipe or recipe_for(PAYLOAD), self.cache, log=self.log.append)

        def corrupt_cache(self):
            self.cache.mkdir(exist_ok=True)
            (self.cache / TARBALL).write_bytes(CORRUPT)

        def cache_listing(self):
            return sorted(p.name for p in self.cache.iterdir())

    r = Remotes()
    monkeypatch.setattr(sources, "_from_python_org", r.fetcher("python.org"))
    monkeypatch.setattr(sources, "_from_debian", r.fetcher("Debian"))
    return r


def test_corrupt_cache_falls_through_to_python_org(remotes):
    remotes.corrupt_cache()
    remotes.gives.update({"python.org": PAYLOAD, "Debian": "must not be asked"})
    path = remotes.fetch()
    assert path == remotes.cache / TARBALL and path.read_bytes() == PAYLOAD
    assert remotes.calls == ["python.org"]
    assert remotes.cache_listing() == [TARBALL]
    said = "\n".join(remotes.log)
    # the log says the cached file was deleted, with both hashes, and where the good one came from
    assert f"sha256 {sha(CORRUPT)}, expected {sha(PAYLOAD)}" in said and "deleted" in said
    assert f"cached {TARBALL} from python.org" in said
    # the next fetch is from the cache alone
    remotes.gives["python.org"] = "must not be asked"
    assert remotes.fetch() == path and remotes.calls == ["python.org"]


def test_corrupt_cache_and_unreachable_python_org_fall_through_to_debian(remotes):
    remotes.corrupt_cache()
    remotes.gives.update({"python.org": "www.python.org: Name or service not known", "Debian": PAYLOAD})
    path = remotes.fetch()
    assert path.read_bytes() == PAYLOAD
    assert remotes.calls == ["python.org", "Debian"]
    assert remotes.cache_listing() == [TARBALL]   # python.org's half-made file went with its temporary directory
    said = "\n".join(remotes.log)
    assert sha(CORRUPT) in said and "python.org: cannot provide" in said and "Name or service not known" in said
    assert f"cached {TARBALL} from Debian" in said


def test_download_with_other_bytes_is_not_cached_and_the_next_source_is_tried(remotes):
    remotes.gives.update({"python.org": b"tampered" + PAYLOAD, "Debian": PAYLOAD})
    assert remotes.fetch().read_bytes() == PAYLOAD
    assert remotes.calls == ["python.org", "Debian"]
    assert remotes.cache_listing() == [TARBALL]
    assert any(sha(b"tampered" + PAYLOAD) in line and "not cached" in line for line in remotes.log)


def test_no_source_with_the_pinned_bytes_is_a_clear_error_and_leaves_the_cache_empty(remotes):
    remotes.corrupt_cache()
    remotes.gives.update({"python.org": b"python.org's" + PAYLOAD, "Debian": b"Debian's" + PAYLOAD})
    recipe = recipe_for(PAYLOAD)
    with pytest.raises(HashMismatch) as info:
        remotes.fetch(recipe)
    message = str(info.value)
    assert remotes.calls == ["python.org", "Debian"]
    assert remotes.cache_listing() == [], "something was left in the cache"
    assert message.startswith(f"no source has the pinned bytes of CPython 3.12.15 ({TARBALL}, sha256 {sha(PAYLOAD)})")
    # every source tried, in order, with what it gave
    lines = [line for line in message.splitlines() if line.startswith("  - ")]
    assert [line.split(":")[0] for line in lines] == ["  - source cache", "  - python.org", "  - Debian"]
    assert sha(CORRUPT) in lines[0] and "deleted" in lines[0]
    assert sha(b"python.org's" + PAYLOAD) in lines[1] and sha(b"Debian's" + PAYLOAD) in lines[2]
    # and the fix: the python.org tarball into the cache directory
    assert recipe.url in message and f"put it in {remotes.cache}/" in message and sources.CACHE_ENV in message


def test_corrupt_cache_and_no_reachable_source_is_unavailable(remotes):
    remotes.corrupt_cache()
    remotes.gives.update({"python.org": "connection refused", "Debian": "apt-get update failed"})
    with pytest.raises(SourceUnavailable) as info:
        remotes.fetch()
    message = str(info.value)
    assert "not reachable" in message and sha(CORRUPT) in message
    assert "python.org: connection refused" in message and "Debian: apt-get update failed" in message
    assert f"put it in {remotes.cache}/" in message
    assert remotes.cache_listing() == []


def test_unreachable_source_says_how_to_provide_it(tmp_path, monkeypatch):
    monkeypatch.setenv(sources.MIRROR_ENV, "http://127.0.0.1:9")  # discard port: connection refused
    cache = tmp_path / "cache"
    recipe = recipe_for(PAYLOAD)
    with pytest.raises(SourceUnavailable) as info:
        sources.fetch_source(recipe, cache, log=lambda *_: None)
    message = str(info.value)
    assert "CPython 3.12.15" in message and "not reachable" in message
    assert str(cache) in message and sources.CACHE_ENV in message
    assert recipe.sha256 in message
    assert "no Debian source package mirrors 3.12.15" in message
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
