"""What an "always" covers: one exact shell command, spelled with other blanks at most, never another."""

from __future__ import annotations

from geode.tools.always_scope import always_key


def _key(command: str) -> str:
    return always_key("run_bash", {"command": command})


def test_the_same_words_share_a_key_and_different_commands_never_do() -> None:
    assert _key("ls -la") == _key("  ls \t -la ")  # the shell splits both into the same words
    different = [
        "ls -la",
        "ls /etc",
        "bash -c 'ls -la'",
        "ls -la; rm -rf x",
        "ls -la\nrm -rf x",
        "echo 'a  b'",
        "echo 'a b'",
        "echo a\\  b",  # an escaped blank is part of a word
        "echo a\\ b",
        'echo "a  b"',
    ]
    assert len({_key(c) for c in different}) == len(different)
    assert always_key("write_file", {"file_path": "a"}) == always_key("write_file", {"file_path": "b"})
