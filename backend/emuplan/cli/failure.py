"""The CLI's one way out on bad input or a refused request. Its own module, below ``cli.app`` and
``cli.remote``, so that neither imports the other for it."""

import typer


def fail(message: str) -> None:
    """Every command's way out on bad input or a refused request: the message on stderr, exit status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)
