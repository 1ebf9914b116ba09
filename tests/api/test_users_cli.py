"""`emuplan users`: accounts on the configured database, passwords and tokens printed once."""

import re

from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.cli.serve import sign_in_notice
from emuplan.roles import Role
from emuplan.store import accounts as store
from emuplan.store.db import Database

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_add_prints_a_password_that_signs_in_and_list_shows_roles(cli_env, database: Database) -> None:
    added = invoke("users", "add", "ada", "--role", "editor")
    assert added.exit_code == 0
    match = re.fullmatch(r"account 'ada' \(editor\) added\. Its password, shown once: (\S{16})\n", added.output)
    assert match is not None, added.output
    with database.read_session() as session:
        account = store.get_account(session, "ada")
    assert (account.name, account.role) == ("ada", "editor")
    assert store.check_password(account.password_hash, match.group(1))
    assert match.group(1) not in account.password_hash
    assert invoke("users", "add", "bob").exit_code == 0
    assert invoke("users", "token", "bob", "--label", "ci").exit_code == 0
    listed = invoke("users", "list")
    lines = listed.output.splitlines()
    assert lines[0] == "name  role    tokens  added"
    assert [line.split()[:3] for line in lines[1:]] == [["ada", "editor", "0"], ["bob", "viewer", "1"]]
    assert (invoke("users", "role", "bob", "admin").output) == "account 'bob' is now admin\n"
    with database.read_session() as session:
        assert store.get_account(session, "bob").role == Role.admin


def test_token_prints_a_bearer_token_that_resolves_to_the_account(cli_env, database: Database) -> None:
    invoke("users", "add", "ada", "--role", "viewer")
    made = invoke("users", "token", "ada", "--expires-in-days", "30")
    match = re.fullmatch(r"API token (\d+) for 'ada', shown once: (emu_\S{43})\n", made.output)
    assert match is not None, made.output
    with database.read_session() as session:
        who = store.resolve_api_token(session, match.group(2))
    assert (who.name, who.role, who.via) == ("ada", Role.viewer, "token")


NAME_RULE = "must be 1 to 64 letters, digits or . _ @ + - (not starting with . or -)\n"


def test_bad_names_and_missing_accounts_exit_2_with_the_message(cli_env) -> None:
    assert invoke("users", "add", "ada").exit_code == 0
    cases = {
        ("users", "add", "ada"): "error: name: an account named 'ada' exists already\n",
        ("users", "add", "two words"): "error: name: 'two words' " + NAME_RULE,
        ("users", "remove", "nobody"): "error: no account named 'nobody'\n",
        ("users", "token", "nobody"): "error: no account named 'nobody'\n",
        ("users", "role", "nobody", "admin"): "error: no account named 'nobody'\n",
    }
    for arguments, message in cases.items():
        result = invoke(*arguments)
        assert (result.exit_code, result.output) == (2, message), arguments
    refused = invoke("users", "add", "eve", "--role", "root")
    assert refused.exit_code == 2
    assert "Invalid value for '--role'" in refused.output


def test_serve_says_whether_sign_in_is_on_and_how_to_make_the_first_account(cli_env) -> None:
    assert sign_in_notice("none") == "sign-in: off (EMUPLAN_AUTH=none): whoever reaches this port can do everything"
    assert sign_in_notice("accounts") == "sign-in: on, but no account exists yet: emuplan users add NAME --role admin"
    invoke("users", "add", "ada", "--role", "admin")
    assert sign_in_notice("accounts") == "sign-in: on, 1 account (emuplan users list)"
