"""``emuplan users``: accounts for ``EMUPLAN_AUTH=accounts``, managed on the server's own database, or with
--server through its /api/admin/accounts by an admin's token (an admin does the same on the /admin page).

Passwords and tokens are printed once and never stored in the clear: hand them over and forget them.
The last admin can be neither demoted nor removed.
"""

from typing import Annotated

import typer

from emuplan.cli.app import app, fail, in_store, remote_server
from emuplan.roles import ROLE_DUTIES, Role
from emuplan.wording import plural

users_app = typer.Typer(
    help="Accounts for EMUPLAN_AUTH=accounts: add, list, change role, reset a password, remove, make API "
    "tokens.\n\n" + "\n\n".join(f"{role}: may {duties}." for role, duties in ROLE_DUTIES.items()),
    no_args_is_help=True,
)
app.add_typer(users_app, name="users")

# With --server: the admin API, by an admin's token (--token, EMUPLAN_TOKEN).
_ACCOUNTS = "/api/admin/accounts"
ROLE_HELP = "viewer, editor or admin (emuplan users --help says what each may do)."


@users_app.command("add")
def add_user(
    name: Annotated[str, typer.Argument(help="Sign-in name: letters, digits or . _ @ + - (not starting with . or -).")],
    role: Annotated[Role, typer.Option(help=ROLE_HELP)] = Role.viewer,
) -> None:
    """Add an account and print its password (shown once; the account page changes it)."""
    server = remote_server()
    if server is not None:
        password = server.post("/api/admin/accounts", {"name": name, "role": role})["password"]
    else:
        from emuplan.store import accounts as store

        password = in_store(lambda session: store.create_account(session, name, role)[1], write=True)
    typer.echo(f"account {name!r} ({role}) added. Its password, shown once: {password}")


@users_app.command("list")
def list_users() -> None:
    """Every account with its role and how many active API tokens it has."""
    server = remote_server()
    if server is not None:
        listed = [(a["name"], a["role"], a["active_tokens"], a["created_at"][:10]) for a in server.get(_ACCOUNTS)]
    else:
        from emuplan.store import accounts as store

        listed = [
            (a.name, a.role, a.active_tokens, a.created_at.strftime("%Y-%m-%d"))
            for a in in_store(store.listed_accounts)
        ]
    if not listed:
        typer.echo("no accounts yet: emuplan users add NAME --role admin")
        return
    width = max(len("name"), *(len(name) for name, *_ in listed))
    typer.echo(f"{'name':<{width}}  {'role':<6}  {'tokens':>6}  added")
    for name, role, tokens, added in listed:
        typer.echo(f"{name:<{width}}  {role:<6}  {tokens:>6}  {added}")


@users_app.command("role")
def change_role(
    name: Annotated[str, typer.Argument(help="Account name.")],
    role: Annotated[Role, typer.Argument(help=ROLE_HELP)],
) -> None:
    """Give an account another role (its sessions and tokens act with it from the next request)."""
    server = remote_server()
    if server is not None:
        server.patch(f"{_ACCOUNTS}/{name}", {"role": role})
    else:
        from emuplan.store import accounts as store

        in_store(lambda session: store.set_role(session, name, role), write=True)
    typer.echo(f"account {name!r} is now {role}")


@users_app.command("password")
def reset_password(name: Annotated[str, typer.Argument(help="Account name.")]) -> None:
    """Give an account a new random password and print it (shown once). With EMUPLAN_PASSWORD_CHANGE_SIGNS_OUT
    (the default) its browsers are signed out and its API tokens revoked."""
    server = remote_server()
    if server is not None:
        answer = server.post(f"{_ACCOUNTS}/{name}/password", {})
        password, sessions, tokens = answer["password"], answer["sessions_ended"], answer["tokens_revoked"]
        sign_out = True  # the server's own setting decided; it says what it ended (none when it keeps them)
    else:
        from emuplan.settings import get_settings
        from emuplan.store import accounts as store

        sign_out = get_settings().password_change_signs_out
        password, signed_out = in_store(lambda session: store.reset_password(session, name, sign_out), write=True)
        sessions, tokens = signed_out.sessions, signed_out.tokens
    ended = f"; {plural(sessions, 'session')} ended, {plural(tokens, 'API token')} revoked"
    typer.echo(f"new password for {name!r}, shown once: {password}{ended if sign_out else ''}")


@users_app.command("remove")
def remove_user(name: Annotated[str, typer.Argument(help="Account name.")]) -> None:
    """Remove an account: its browsers are signed out and its tokens stop working at once."""
    server = remote_server()
    if server is not None:
        server.delete(f"{_ACCOUNTS}/{name}")
    else:
        from emuplan.store import accounts as store

        in_store(lambda session: store.remove_account(session, name), write=True)
    typer.echo(f"account {name!r} removed, with its sessions and API tokens")


@users_app.command("token")
def make_token(
    name: Annotated[str, typer.Argument(help="Account name.")],
    label: Annotated[str, typer.Option(help="What the token is for.")] = "CLI",
    expires_in_days: Annotated[
        float | None, typer.Option("--expires-in-days", min=0.001, help="Default: never expires.")
    ] = None,
) -> None:
    """Print a new API token for an account (shown once; revoke it on the account page). On the server's
    database only: its owner makes their own on /account."""
    if remote_server() is not None:
        fail(
            "a token for another account is made on the server (emuplan users token there); its owner makes one "
            "on /account"
        )
    from emuplan.store import accounts as store

    def make(session) -> tuple[int, str]:
        account = store.get_account(session, name)
        token, secret = store.create_api_token(session, account.id, label, expires_in_days)
        return token.id, secret

    token_id, secret = in_store(make, write=True)
    typer.echo(f"API token {token_id} for {name!r}, shown once: {secret}")
