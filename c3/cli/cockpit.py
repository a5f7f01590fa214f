"""`c3` with no subcommand and `c3 demo`: start the cockpit.

Terminal choices are applied before Textual is imported, because Textual reads its settings
(colour system, frame rate) from the environment at import time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from c3.cli.common import PORT

if TYPE_CHECKING:
    from c3.services import Services

COLOR_SYSTEMS = {"auto": "auto", "truecolor": "truecolor", "256": "256", "16": "standard"}


def configure_terminal(color: str, ascii: bool = False) -> None:
    """Colour depth from --color, ASCII from --ascii (c3/look.py); a modest frame rate (the cockpit
    changes ~once a second, often over SSH)."""
    if color not in COLOR_SYSTEMS:
        raise click.BadParameter(f"--color must be one of {', '.join(COLOR_SYSTEMS)}")
    if color != "auto":
        os.environ["TEXTUAL_COLOR_SYSTEM"] = COLOR_SYSTEMS[color]
    os.environ.setdefault("TEXTUAL_FPS", "30")


def run_cockpit(readonly: bool = False, color: str = "auto", no_mouse: bool = False, demo: bool = False, estate_path: Path | None = None, bell: bool = False,
                ascii: bool = False, demo_gateway_port: int | None = None) -> None:
    """Build the facade (real backend; the simulated rig and runtime for `demo`) and run the app."""
    configure_terminal(color, ascii)
    from c3.app import C3App

    def build_services() -> Services:  # runs in a worker thread
        from c3.services_real import build_services as build

        return build(readonly=readonly, demo=demo, estate_path=estate_path, demo_gateway_port=demo_gateway_port)

    # The facade (pydantic models, SDK adapters, the runtime) is built in a worker after the first
    # frame, so the cockpit shows up about as fast as a bare Textual app.
    app = C3App(factory=build_services, readonly=readonly, bell=bell, ascii=True if ascii else None)

    try:
        app.run(mouse=not no_mouse)
    finally:
        if app.services is not None:
            app.services.close()
    if app.startup_error is not None:
        raise app.startup_error


@click.command()
@click.option("--readonly", is_flag=True, help="Refuse every write.")
@click.option("--color", type=click.Choice(list(COLOR_SYSTEMS)), default=None, help="Colour depth (default: what `c3 --color` said, else auto).")
@click.option("--no-mouse", is_flag=True, help="Do not capture the mouse (keeps terminal copy/paste).")
@click.option("--bell", is_flag=True, help="Ring the terminal bell when a pod gets into trouble.")
@click.option("--ascii", "ascii_only", is_flag=True, help="Draw ASCII only (also C3_ASCII=1; automatic when the locale is not UTF-8).")
@click.option("--gateway-port", type=PORT, default=8012, show_default=True,
              help="Loopback port of the demo's gateway (`c3 gateway serve` over the demo's pods; a pod boots on its first request).")
@click.option("--no-gateway", is_flag=True, help="Run the demo without its gateway.")
@click.pass_context
def demo(ctx: click.Context, readonly: bool, color: str | None, no_mouse: bool, bell: bool, ascii_only: bool, gateway_port: int, no_gateway: bool) -> None:
    """The cockpit on a built-in simulated rig with a simulated runtime (no GPU, no Docker needed).

    The first demo also starts the demo's gateway on 127.0.0.1:8012: `curl` a pod's name there
    (`/v1/chat/completions`, `"model": "NAME"`) and the pod boots on demand. It stops when the last demo quits."""
    parent = ctx.obj or {}
    run_cockpit(
        readonly=readonly or parent.get("readonly", False),
        color=color or parent.get("color", "auto"),
        no_mouse=no_mouse or parent.get("no_mouse", False),
        demo=True,
        bell=bell or parent.get("bell", False),
        ascii=ascii_only or parent.get("ascii", False),
        demo_gateway_port=None if no_gateway else gateway_port,
    )
