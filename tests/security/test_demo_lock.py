"""The demo's lock file (``demo.lock`` in the data directory) is opened without following a link and
refused when it is anything but a regular file of its own, so the demo never empties a file it
does not own; what a lock file says reaches the terminal escaped."""

from __future__ import annotations

import fcntl
import json
import os

import pytest
from django.core.management.base import CommandError

from leaderboard.management.commands.demo import DemoLock

HOSTILE = "\x1b[2J\x1b]0;owned\x07\r\n\x08\x9b31m"


def _no_control_characters(text: str) -> bool:
    return all(ch.isprintable() for ch in text)


def test_a_symlinked_lock_is_refused_and_its_target_left_alone(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("do not empty me")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "demo.lock").symlink_to(target)

    with pytest.raises(CommandError, match="symbolic link") as refused:
        DemoLock(data_dir).acquire(host="127.0.0.1", port="8000")

    assert target.read_text() == "do not empty me"
    assert "Remove it" in str(refused.value)
    assert (data_dir / "demo.lock").is_symlink()


def test_a_dangling_symlink_is_not_followed_to_create_its_target(tmp_path):
    target = tmp_path / "elsewhere" / "made-by-the-demo"
    target.parent.mkdir()
    (tmp_path / "demo.lock").symlink_to(target)
    with pytest.raises(CommandError, match="symbolic link"):
        DemoLock(tmp_path).acquire(host="127.0.0.1", port="8000")
    assert not target.exists()


def test_a_hard_linked_lock_is_refused_and_the_other_name_left_alone(tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("shared contents")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    os.link(other, data_dir / "demo.lock")
    with pytest.raises(CommandError, match="hard link"):
        DemoLock(data_dir).acquire(host="127.0.0.1", port="8000")
    assert other.read_text() == "shared contents"


def test_a_lock_that_is_a_directory_is_refused_with_a_message(tmp_path):
    (tmp_path / "demo.lock").mkdir()
    with pytest.raises(CommandError, match="not a regular file"):
        DemoLock(tmp_path).acquire(host="127.0.0.1", port="8000")


def test_a_held_lock_s_contents_are_printed_escaped(tmp_path):
    path = tmp_path / "demo.lock"
    path.write_text(json.dumps({"pid": HOSTILE, "host": HOSTILE, "port": HOSTILE}))
    holder = os.open(path, os.O_RDWR)  # another open file: its flock conflicts as another process's would
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(CommandError, match="already running") as refused:
            DemoLock(tmp_path).acquire(host="127.0.0.1", port="8000")
    finally:
        os.close(holder)
    message = str(refused.value)
    assert _no_control_characters(message), repr(message)
    assert "\\x1b[2J" in message and "\\x07" in message and "\\r\\n" in message


def test_a_stale_lock_s_contents_are_printed_escaped(tmp_path):
    (tmp_path / "demo.lock").write_text(json.dumps({"pid": HOSTILE}))
    lock = DemoLock(tmp_path).acquire(host="127.0.0.1", port="8000")
    try:
        line = lock.stale_message()
    finally:
        lock.release()
    assert _no_control_characters(line), repr(line)
    assert "\\x1b[2J" in line and "was taken over" in line
