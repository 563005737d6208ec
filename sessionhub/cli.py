"""``sessionhub``: SessionHub embedded, from an installed package.

``sessionhub`` (or ``sessionhub serve``) does what ``make run`` does in a checkout: apply
the migrations, create a first team and API token when there is none (printed once), and
serve on http://127.0.0.1:8000 with Django's server. Everything lives in one data folder
(``--data-dir``, else ``$SESSIONHUB_HOME``, else the platform's user data folder): the
SQLite database, the generated secret key, the retention archives. Background tasks run
in-process after each commit, as in a checkout with no ``REDIS_URL``.

Any other command is a Django management command run against the same folder:
``sessionhub createsuperuser``, ``sessionhub create_api_token TEAM``, ``sessionhub
export_sessions TEAM -o team.json``. What the environment already sets wins over these
defaults (``DATABASE_URL``, ``REDIS_URL``, ``SECRET_KEY``, ``DEBUG``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path

SECRET_FILE = "secret_key"  # noqa: S105 - a file name


def default_data_dir() -> Path:
    """Where an installed SessionHub keeps its data when nothing says otherwise."""
    if os.environ.get("SESSIONHUB_HOME"):
        return Path(os.environ["SESSIONHUB_HOME"]).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "SessionHub"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "SessionHub"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "sessionhub"


def _secret_key(folder: Path) -> str:
    """The folder's secret key, made once and kept readable by its owner only."""
    path = folder / SECRET_FILE
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(50) + "\n")
    return path.read_text().strip()


def embedded_environment(folder: Path) -> None:
    """The settings of an embedded run from ``folder``; the environment's own win."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    defaults = {
        "DJANGO_SETTINGS_MODULE": "sessionhub.settings",
        # As ``make run``: a local server, so Django's own development settings.
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{folder.resolve() / 'sessionhub.sqlite3'}",
        "SESSIONHUB_ARCHIVE_DIR": str(folder.resolve() / "archive"),
        "STATIC_ROOT": str(folder.resolve() / "staticfiles"),
    }
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    if not os.environ.get("SECRET_KEY"):
        os.environ["SECRET_KEY"] = _secret_key(folder)


def serve(folder: Path, host: str, port: int) -> None:
    """Migrate, make the first token when there is none, then serve until stopped."""
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False)
    call_command("bootstrap")
    print(f"Data folder: {folder}", flush=True)
    call_command("runserver", f"{host}:{port}", use_reloader=False)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sessionhub",
        description="Run SessionHub embedded (SQLite, tasks in-process), or run a Django "
        "management command against the same data folder.",
        epilog="Examples: sessionhub | sessionhub serve --port 8080 | sessionhub "
        "createsuperuser | sessionhub create_api_token default --scopes ingest,read",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="the data folder (default: $SESSIONHUB_HOME, else the user data folder)",
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="serve [--host H] [--port P] (the default), or a management command",
    )
    return parser


def _serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sessionhub serve")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    folder = args.data_dir.expanduser() if args.data_dir else default_data_dir()
    embedded_environment(folder)
    command = args.command
    if not command or command[0] == "serve":
        options = _serve_parser().parse_args(command[1:])
        serve(folder, options.host, options.port)
        return
    from django.core.management import execute_from_command_line

    execute_from_command_line(["sessionhub", *command])
