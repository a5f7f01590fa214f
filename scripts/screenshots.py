#!/usr/bin/env python3
"""Regenerate screenshots/*.svg: every mode and modal of the cockpit — the real facade over the
simulated world `c3 demo` runs (tests/cockpit/world.py builds it: stub engines, the demo rig).

    .venv/bin/python scripts/screenshots.py [--only NAME[,NAME]] [--png]

Fixed clock (12:00 UTC), no timers, no cursor blink, pids and timestamps pinned: the same SVGs on every run.
`--png` also writes PNGs (for looking, not for committing) into /tmp/c3-screenshots-png/ when
cairosvg is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["TZ"] = "UTC"
time.tzset()
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

# The suite's network guard in this process and its children (the venv's .pth): the pictures' node that is down
# (TEST-NET-2) answers "no route to host" as it does under the snapshot tests, and no packet leaves the machine.
from tests.plugins import netguard_socket  # noqa: E402

os.environ.setdefault(netguard_socket.ENV, tempfile.mkdtemp(prefix="c3-netguard-shots-"))
netguard_socket.install()

from textual.widgets import Input  # noqa: E402 - after the environment above

from tests.cockpit.scenes import SCENES, Worlds, play, scene_app  # noqa: E402

Input._toggle_cursor = lambda self: None  # type: ignore[method-assign]  # no blink in pictures
OUT = ROOT / "screenshots"


async def shoot(app, scene, out: Path) -> Path:
    async with app.run_test(size=scene.size) as pilot:
        await play(scene, pilot)
        path = app.save_screenshot(filename=f"{scene.name}.svg", path=str(out))
    return Path(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated scene names")
    parser.add_argument("--png", action="store_true", help="also write PNGs (needs cairosvg)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    wanted = {n for n in args.only.split(",") if n}
    args.out.mkdir(parents=True, exist_ok=True)
    worlds = Worlds()
    try:
        for scene in SCENES:
            if wanted and scene.name not in wanted:
                continue
            with scene_app(scene, worlds) as app:
                path = asyncio.run(shoot(app, scene, args.out))
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  {scene.title}")
            if args.png:
                import cairosvg

                png_dir = Path("/tmp/c3-screenshots-png")
                png_dir.mkdir(exist_ok=True)
                cairosvg.svg2png(url=str(path), write_to=str(png_dir / f"{scene.name}.png"), output_width=scene.size[0] * 12)
    finally:
        worlds.close()


if __name__ == "__main__":
    main()
