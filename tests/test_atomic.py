import os
import stat

import pytest

from privsyn_core.data.atomic import write_atomically


def test_an_atomic_output_gets_the_permissions_of_a_plain_open(tmp_path):
    """mkstemp makes 0600 files: a bundle meant for sharing came out unreadable to others.
    Every writer goes through privsyn_core.data.atomic and gets 0666 minus the umask."""
    old = os.umask(0o022)
    try:
        write_atomically(b"x", tmp_path / "bundle.zip")
        mode = stat.S_IMODE((tmp_path / "bundle.zip").stat().st_mode)
    finally:
        os.umask(old)
    assert mode == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["bundle.zip"]  # no .part left


def test_a_failed_atomic_write_leaves_the_old_file_and_nothing_else(tmp_path, monkeypatch):
    target = tmp_path / "ledger.json"
    target.write_bytes(b"old")

    def refuse(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_atomically(b"new", target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]
