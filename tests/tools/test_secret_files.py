"""Issue 26, in one process: what counts as a GEODE home and as a credential file (and what does not), the
identity check through a hardlink, and the labelled masks of tool results."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from geode.redaction import mask_secrets
from geode.tools.paths import AllowedRoots, Boundary, Exclusion
from geode.tools.result_redaction import ResultRedactor
from geode.tools.secret_files import SecretFiles, credential_name, is_geode_home
from geode.tools.spec import ToolResult


def _home(d: Path, *, keys: bool = False, evidence: bool = True, config: bool = False) -> Path:
    (d / "records").mkdir(parents=True)
    if evidence:
        (d / "evidence").mkdir()
    if config:
        (d / "config.toml").write_text("")
    if keys:
        (d / "keys").mkdir()
        (d / "keys" / "host.secret").write_text("k")
    return d


def test_home_markers_and_an_ordinary_project(tmp_path: Path) -> None:
    assert is_geode_home(_home(tmp_path / "a"))
    assert is_geode_home(_home(tmp_path / "b", evidence=False, config=True))
    keys_only = tmp_path / "c" / "keys"
    keys_only.mkdir(parents=True)
    (keys_only / "host.secret").write_text("k")
    assert is_geode_home(tmp_path / "c")
    project = tmp_path / "project"  # config.toml and .env are common in projects: not a home
    project.mkdir()
    (project / "config.toml").write_text("")
    (project / ".env").write_text("X=1\n")
    assert not is_geode_home(project)


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        ("/srv/u/.aws/credentials", True),
        ("/srv/u/.ssh/id_ed25519", True),
        ("/srv/u/.ssh/id_ed25519.pub", False),
        ("/srv/u/.netrc", True),
        ("/srv/u/.codex/auth.json", True),
        ("/srv/u/.config/gh/hosts.yml", True),
        ("/srv/proj/auth.json", False),
        ("/srv/proj/.npmrc", False),  # identity only: a project's own .npmrc is configuration
        ("/srv/proj/credentials", False),
    ],
)
def test_credential_names(path: str, secret: bool) -> None:
    assert credential_name(Path(path)) is secret


def test_another_home_is_refused_except_its_workspace_and_a_hardlink_by_identity(tmp_path: Path) -> None:
    own = _home(tmp_path / "own", config=True)
    (own / ".env").write_text("KEY=v\n")
    ws = tmp_path / "ws"
    other = _home(ws / "other", keys=True)
    (other / "workspace").mkdir()
    (other / "workspace" / "notes.md").write_text("fine\n")
    (other / ".env").write_text("KEY=w\n")
    os.link(own / ".env", ws / "envlink")
    (ws / "plain.txt").write_text("ok\n")
    excluded = Exclusion((own,), home=own)
    b = Boundary.of(AllowedRoots((ws,), excluded))
    assert b.verdict(ws / "envlink") == "geode_home"  # the home's .env by (device, inode)
    assert b.verdict(other / ".env") == "geode_home" and b.verdict(other / "keys") == "geode_home"
    assert b.verdict(other / "workspace" / "notes.md") is None
    assert b.verdict(ws / "plain.txt") is None
    assert SecretFiles({}).verdict(ws / "envlink") is None  # nothing but identity catches the hardlink


def test_masks_are_labelled_and_counted(tmp_path: Path) -> None:
    text = (
        "gh ghp_A1b2C3d4E5f6G7h8I9j0K1l2 pat github_pat_11AAAAAAA0123456789_abcdefghij "
        "ant sk-ant-api03-abcdefgh proj sk-proj-abcdefgh1234 slack xoxb-123-456-abcdef "
        "aws AKIAIOSFODNN7EXAMPLE aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY "
        "tg 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0 "
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U "
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY----- "
        "code token = self.token_for_the_user"
    )
    masked, counts = mask_secrets(text)
    assert counts == {
        "github-token": 2,
        "anthropic-key": 1,
        "openai-key": 1,
        "slack-token": 1,
        "aws-access-key-id": 1,
        "aws-secret": 1,
        "telegram-bot-token": 1,
        "jwt": 1,
        "private-key": 1,
    }, counts
    assert "[REDACTED:github-token]" in masked and "MIIEow" not in masked and "wJalr" not in masked
    assert "token = self.token_for_the_user" in masked  # code is not a secret
    (tmp_path / ".env").write_text("PLAIN=plain-value-without-shape\nSHORT=abc\n")
    red = ResultRedactor(tmp_path, environ={})
    res = ToolResult(tool_use_id="t", name="run_bash", content={"stdout": "plain-value-without-shape abc"})
    out = red.apply(res).content
    assert out == {"stdout": "[REDACTED:env:PLAIN] abc", "redacted": {"env:PLAIN": 1}}, out



class _CountedEnviron(dict[str, str]):
    """An environment that counts how often it is walked."""

    walks = 0

    def items(self):  # type: ignore[override]
        type(self).walks += 1
        return super().items()


def test_the_secrets_to_mask_are_worked_out_once_per_dotenv_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Masking is on every tool result's path: the ``.env`` is parsed and the environment walked once per
    change of the ``.env``, not once per result; a changed value is masked from the next result on."""
    from geode.home import GeodeHome

    reads: list[Path] = []
    real = GeodeHome.load_dotenv

    def counted(self: GeodeHome) -> dict[str, str]:
        reads.append(self.env_file)
        return real(self)

    monkeypatch.setattr(GeodeHome, "load_dotenv", counted)
    env = tmp_path / ".env"
    env.write_text("FIRST=first-secret-value\n")
    environ = _CountedEnviron(API_TOKEN="third-secret-value")
    red = ResultRedactor(tmp_path, environ=environ)
    text = "first-secret-value second-secret-value third-secret-value"
    res = ToolResult(tool_use_id="t", name="read_file", content={"text": text})
    for _ in range(20):
        assert red.apply(res).content["redacted"] == {"env:API_TOKEN": 1, "env:FIRST": 1}
    assert (len(reads), _CountedEnviron.walks) == (1, 1)
    env.write_text("FIRST=first-secret-value\nSECOND=second-secret-value\n")
    os.utime(env, ns=(1, 1))  # a new mtime even within the clock's granularity
    assert red.apply(res).content["redacted"] == {"env:API_TOKEN": 1, "env:FIRST": 1, "env:SECOND": 1}
    assert (len(reads), _CountedEnviron.walks) == (2, 2)
