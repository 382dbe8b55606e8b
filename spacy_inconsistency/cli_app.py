"""The typer application of the command line, on which every command module registers.

Command modules (`cli`'s `detect` and `across`, `relations_commands`,
`bias.commands`) import `app` from here; `spacy_inconsistency.cli` imports the
command modules so that they register, and is the entry point
(`python -m spacy_inconsistency`, the `spacy-inconsistency` script). Keeping
`app` apart means no command module imports the entry point back.
"""
import typer

app = typer.Typer(
    name="spacy-inconsistency",
    help="Find where texts disagree (spaCy components).",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Find where texts disagree (spaCy components)."""
