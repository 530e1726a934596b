"""`judgelab checkpoint list|generate|export`: use any saved training checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from judgelab.config import EmbeddedModel, load_settings
from judgelab.flows.paths import TRAINING
from judgelab_cli.errors import exit_on_error

app = typer.Typer(
    help="List, sample from and export the LoRA checkpoints the training stage saved.",
    no_args_is_help=True,
)
PARAMS = typer.Option(Path("params.yaml"), "--params", "-p", help="Parameters file.")
ROOT = typer.Option(TRAINING, "--root", help="The training stage's output folder.")
SEED = typer.Option(
    None, "--train-seed", help="Which training seed's policy, where train.seeds was set."
)


def _run_dir(root: Path, judge: str, seed: int | None) -> Path:
    """The folder of `judge`'s policy trained with `seed` (`training.layout`)."""
    from judgelab.training.layout import run_dirs

    runs = [r for r in run_dirs(root) if r.judge == judge]
    seeds = sorted(r.seed for r in runs if r.seed is not None)
    if seed is None and seeds:
        raise typer.BadParameter(
            f"{judge} was trained with seeds {seeds}: choose one", param_hint="--train-seed"
        )
    if seed is not None:
        if seed not in seeds:
            have = f"seeds {seeds}" if seeds else "no seeds (a single-seed run)"
            raise typer.BadParameter(f"{judge} has {have}", param_hint="--train-seed")
        return next(r.path for r in runs if r.seed == seed)
    return root / judge


def _checkpoint(root: Path, judge: str, seed: int | None, step: int | None) -> Path:
    from judgelab.training.checkpoint import latest_checkpoint

    folder = _run_dir(root, judge, seed) / "checkpoints"
    if step is None:
        ckpt = latest_checkpoint(folder)
        if ckpt is None:
            raise typer.BadParameter(f"no checkpoint under {folder}", param_hint="--judge")
        return ckpt.path
    path = folder / f"step-{step:03d}"
    if not (path / "adapter_model.safetensors").exists():
        have = sorted(p.name for p in folder.glob("step-*"))
        raise typer.BadParameter(f"{path} not found; have {have}", param_hint="--step")
    return path


def _policy(params: Path) -> tuple[Any, EmbeddedModel]:
    """The settings and the embedded model the training stage trained."""
    settings = load_settings(params)
    spec = settings.model(settings.train.policy)
    if not isinstance(spec, EmbeddedModel):
        raise typer.BadParameter("train.policy must be an embedded model")
    return settings, spec


@app.command("list")
def list_checkpoints(root: Path = ROOT) -> None:
    """Every policy's checkpoints (per judge, and per seed where train.seeds was set) with the
    held-out pass rate of the policy each one holds."""
    import json

    from judgelab.training.layout import run_dirs

    with exit_on_error():
        runs = run_dirs(root)
    for run in runs:
        for ckpt in sorted((run.path / "checkpoints").glob("step-*")):
            state = json.loads((ckpt / "state.json").read_text())
            rows = {r["epoch"]: r for r in state["history"]}
            # step-N holds policy_N, whose row (if measured yet) is epoch N.
            row = rows.get(state["steps"])
            if row is None:
                held = "not evaluated yet"
            elif row["heldout_pass_rate"] is None:  # every held-out sample a sandbox error
                held = "held-out untested"
            else:
                held = f"held-out {row['heldout_pass_rate']:.2f} (n={row['heldout_n']})"
            typer.echo(f"{run.label:24s} {ckpt.name}  {held}  {ckpt}")


@app.command()
def generate(
    judge: str = typer.Option(..., "--judge", help="Whose policy: a name in train.rewards."),
    prompt: str = typer.Option(..., "--prompt", help="The user message."),
    step: int = typer.Option(None, "--step", help="Checkpoint step; default: the newest."),
    seed_of_run: int = SEED,
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, max=2.0),
    max_tokens: int = typer.Option(256, "--max-tokens", min=1, max=4096),
    seed: int = typer.Option(0, "--seed"),
    params: Path = PARAMS,
    root: Path = ROOT,
) -> None:
    """Sample a completion from a saved checkpoint (transformers, base GGUF + adapter)."""
    from judgelab.training.policy import Policy, saved_lora

    with exit_on_error():
        settings, spec = _policy(params)
        path = _checkpoint(root, judge, seed_of_run, step)
        # the adapter's own r, alpha and targets (PEFT's adapter_config.json), not today's
        # train.lora: a changed alpha would load without an error and rescale the adapter
        lora = saved_lora(path) or settings.train.lora
        policy = Policy(spec.zoo, lora, settings.train.device, path, settings.train.dtype)
        messages = [
            {"role": "system", "content": settings.rollouts.system_prompt},
            {"role": "user", "content": prompt},
        ]
        (sample,) = policy.sample(
            [policy.prompt_ids(messages)],
            temperatures=[temperature],
            max_new_tokens=[max_tokens],
            seeds=[seed],
        )
    typer.echo(sample.text)


@app.command()
def export(
    judge: str = typer.Option(..., "--judge", help="Whose policy: a name in train.rewards."),
    out: Path = typer.Option(..., "--out", help="Where to write the GGUF adapter."),
    step: int = typer.Option(None, "--step", help="Checkpoint step; default: the newest."),
    seed_of_run: int = SEED,
    params: Path = PARAMS,
    root: Path = ROOT,
) -> None:
    """Write a checkpoint as a llama.cpp LoRA adapter (use with the base GGUF: --lora)."""
    from judgelab.training.export import export_gguf_adapter
    from judgelab.training.policy import converted_dir

    with exit_on_error():
        _, spec = _policy(params)
        import json

        config = json.loads((converted_dir(spec.zoo) / "config.json").read_text())
        path = export_gguf_adapter(_checkpoint(root, judge, seed_of_run, step), out, config)
    typer.echo(str(path))
