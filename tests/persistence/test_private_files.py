"""The controller's file, its -wal and -shm, and the folders made for it are created for their owner only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from messages.facts import ProviderAdmin, make_fact
from persistence.controller import open_controller
from persistence.private import private_dir, private_file


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_sqlite_controller_and_its_folders_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)  # what most hosts use: 0644 files, 0755 folders
    try:
        c = open_controller(f"sqlite:///{tmp_path / 'var' / 'lib' / 'state.db'}")
        try:
            c.append([make_fact(ProviderAdmin(kind="provider_paused"), provider="p", now=1.0)])
            db = tmp_path / "var" / "lib" / "state.db"
            for path in (db, db.with_name("state.db-wal"), db.with_name("state.db-shm")):
                assert path.exists() and mode(path) == 0o600, f"{path.name}: {oct(mode(path))}"
            for folder in (tmp_path / "var", tmp_path / "var" / "lib"):
                assert mode(folder) == 0o700, f"{folder.name}: {oct(mode(folder))}"
        finally:
            c.close()
    finally:
        os.umask(old)


def test_existing_files_and_folders_keep_their_mode(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o750)
    folder.chmod(0o750)
    f = folder / "file"
    f.write_text("x")
    f.chmod(0o640)
    private_dir(folder)
    private_file(f)
    assert mode(folder) == 0o750 and mode(f) == 0o640 and f.read_text() == "x"
