"""Boot logs: rotated keep 5, 0600, bounded."""

from __future__ import annotations

import stat

from backend.runtime.bootlog import BootLog, boot_log_path


def test_rotation_keeps_five_and_mode_0600():
    for n in range(8):
        log = BootLog("chat")
        log.line(f"boot {n}")
        log.close()
    path = boot_log_path("chat")
    assert "boot 7" in path.read_text()
    assert "boot 6" in path.with_name("chat.log.1").read_text()
    assert "boot 2" in path.with_name("chat.log.5").read_text()
    assert not path.with_name("chat.log.6").exists()
    for p in [path, *(path.with_name(f"chat.log.{i}") for i in range(1, 6))]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600


def test_log_is_bounded():
    log = BootLog("big", max_bytes=1000)
    for _ in range(100):
        log.write("x" * 100 + "\n")
    log.close()
    text = boot_log_path("big").read_text()
    assert len(text) < 1100 and "capped at 1000 bytes" in text
