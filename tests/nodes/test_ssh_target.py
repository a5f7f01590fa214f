"""backend.remote.ssh_target without a network: the user's OpenSSH config applied, the patterns OpenSSH
would file a host key under, and host-key matching by name or by address."""

from __future__ import annotations

import asyncio

import asyncssh

from backend.remote.node import Node
from backend.remote.ssh_target import SshTarget, apply_config, explicit_port, resolve_target

KEY = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def _node(ssh: str) -> Node:
    return Node(name="n", host="http://x:8000", ssh=ssh)


def test_config_alias_port_user_and_host_key_alias(monkeypatch, tmp_path):
    config = tmp_path / "config"
    config.write_text("Host box\n  HostName 10.9.8.7\n  Port 2200\n  User bob\n\nHost kept\n  HostName 10.9.8.6\n  HostKeyAlias kept-key\n")
    monkeypatch.setenv("C3_SSH_CONFIG", str(config))
    target = apply_config(_node("me@box"))
    assert (target.host, target.port, target.username) == ("10.9.8.7", 2200, "me")  # the target's own user wins
    assert apply_config(_node("me@box:2222")).port == 2222  # and its own port
    assert explicit_port(_node("me@[fd00::5]:2022")) == 2022 and explicit_port(_node("me@[fd00::5]")) is None
    kept = asyncio.run(resolve_target(_node("me@kept")))
    assert kept.addresses == ("10.9.8.6",) and kept.patterns() == ["kept-key"]  # an alias stands alone
    assert asyncio.run(resolve_target(_node("me@box"))).patterns() == ["[10.9.8.7]:2200"]


def test_patterns_and_matching_by_name_or_address():
    target = SshTarget(target="spark1", host="spark1", port=22, username="coder", host_key_alias=None,
                       addresses=("192.168.1.10", "fd00::10"))
    assert target.patterns() == ["spark1", "192.168.1.10", "fd00::10"]
    by_address = asyncssh.import_known_hosts(f"192.168.1.10 ssh-ed25519 {KEY}\n")
    assert len(target.trusted_keys(by_address)) == 1  # known by address: asyncssh accepts it too
    data = target.trusted_keys(by_address)[0].public_data
    assert not target.trusts_everywhere(by_address, data)  # so `node trust` still records the name
    full = asyncssh.import_known_hosts(f"{','.join(target.patterns())} ssh-ed25519 {KEY}\n")
    assert target.trusts_everywhere(full, data)
    other_port = SshTarget(target="spark1", host="spark1", port=2222, username=None, host_key_alias=None, addresses=("192.168.1.10",))
    assert other_port.patterns() == ["[spark1]:2222", "[192.168.1.10]:2222"]
    assert other_port.trusted_keys(asyncssh.import_known_hosts("")) == []


def test_a_launch_that_cannot_stop_the_active_profile_is_refused_with_the_command(monkeypatch, tmp_path):
    """One active profile: when the active one cannot be stopped (here its node was unregistered), the
    new launch is refused and names the command to run; nothing about the new one has started."""
    import pytest

    from backend.cluster.standdown import active_to_stand_down, stand_down_active
    from backend.errors import Refused
    from backend.profiles import Profile, save_profile, set_active

    save_profile(Profile(name="old", recipe="r", recipe_digest="d", nodes=["gone"], base_url="http://x:1/v1", model="m"))
    set_active("old")
    assert active_to_stand_down("old") is None and active_to_stand_down("new") == "old"
    with pytest.raises(Refused) as refused:
        asyncio.run(stand_down_active("new"))
    assert "the active profile `old` could not be stopped before launching `new`" in refused.value.message
    assert refused.value.hint and "c3 profile stop old" in refused.value.hint
    assert active_to_stand_down("new") == "old"  # still in the way: the next launch must try again


def test_profile_env_refuses_an_api_key_name_that_would_run_code(tmp_path):
    """`eval "$(c3 profile env)"` is how clients use it: a hostile api_key_env edited into the profile
    file is refused (exit 2, one line), never printed into the user's shell."""
    import subprocess
    import sys

    from backend.profiles import Profile, save_profile, set_active

    marker = tmp_path / "PWNED"
    save_profile(Profile(name="p", recipe="r", recipe_digest="d", nodes=["a"], base_url="http://x:1/v1", model="m",
                         api_key_env=f"X}}$(touch {marker})"))
    set_active("p")
    result = subprocess.run([sys.executable, "-m", "c3", "profile", "env"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("c3: error:") and "touch" not in result.stdout
    subprocess.run(["bash", "-c", 'eval "$(cat)"'], input=result.stdout, capture_output=True, text=True, timeout=10)
    assert not marker.exists()
