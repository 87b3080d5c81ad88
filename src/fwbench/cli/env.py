"""`fwbench env`: what a result recorded on this machine would carry as its host."""

from __future__ import annotations

from fwbench.cli.common import out, print_json
from fwbench.cli.options import JsonOption
from fwbench.environment import host_environment


def command(json: JsonOption = False) -> None:
    """Show the host environment: CPU, memory, GPUs, installed framework versions."""
    env = host_environment()
    if json:
        print_json(env)
        return
    for key, value in env.items():
        out.print(f"[bold]{key}[/bold]: {value}")
