"""How long failed sign-ins hold an address off, and what a password change or the last admin may not do:
the store's rules, on both databases."""

import pytest

from emuplan.roles import Role
from emuplan.store import accounts as store
from emuplan.store.db import Database

pytestmark = pytest.mark.both_databases


def fail(database: Database, name: str, address: str, times: int) -> None:
    for _ in range(times):
        with database.writing() as session:
            store.record_failure(session, name, address)


def held_off(database: Database, name: str, address: str) -> tuple[str, int] | int:
    """The refusal's message and Retry-After, or the address's recent failures when it may try."""
    with database.read_session() as session:
        try:
            return store.refuse_if_held_off(session, name, address)
        except store.SignInRateLimited as error:
            return str(error), error.retry_after_s


def test_failures_hold_an_address_off_for_doubling_waits_and_never_the_owner_elsewhere(database: Database) -> None:
    # Three free failures at one account from one address; from the 4th on, 1, 2, 4, 8, 16 s.
    fail(database, "ada", "10.0.0.1", 3)
    assert held_off(database, "ada", "10.0.0.1") == 3
    fail(database, "ada", "10.0.0.1", 5)
    message, wait = held_off(database, "ada", "10.0.0.1")
    assert wait in (15, 16)
    assert (
        message
        == f"Too many failed sign-ins at this account from your address: 8 in 15 minutes. Try again in {wait} s."
    )
    # Another account from the same address, and the same account from another address, are not held off.
    assert held_off(database, "bob", "10.0.0.1") == 8
    assert held_off(database, "ada", "10.0.0.2") == 0
    # Ten failures at ada from anywhere: under attack, an address that failed there has no free tries left.
    fail(database, "ada", "10.0.0.3", 2)
    assert held_off(database, "ada", "10.0.0.3")[1] in (1, 2)  # 2 failures: 2 s, where 3 were free before
    fail(database, "ada", "10.0.0.3", 3)
    assert held_off(database, "ada", "10.0.0.3")[1] in (15, 16)  # 5 failures: 16 s, not 2
    # The owner, from an address that has not failed, still goes straight in.
    assert held_off(database, "ada", "10.0.0.9") == 0


def test_an_address_failing_at_many_names_is_held_off_past_ten(database: Database) -> None:
    for attempt in range(store.FREE_FAILURES_PER_ADDRESS):
        fail(database, f"name-{attempt}", "10.0.0.1", 1)
    assert held_off(database, "anyone", "10.0.0.1") == 10
    fail(database, "more", "10.0.0.1", 5)
    message, wait = held_off(database, "anyone", "10.0.0.1")
    assert wait in (15, 16)
    assert message == f"Too many failed sign-ins from your address: 15 in 15 minutes. Try again in {wait} s."


def test_the_right_password_forgives_only_its_own_addresss_slips(database: Database) -> None:
    fail(database, "ada", "10.0.0.1", 2)
    fail(database, "ada", "10.0.0.2", 9)
    with database.writing() as session:
        store.forget_failures(session, "ada", "10.0.0.1")
    assert held_off(database, "ada", "10.0.0.1") == 0
    assert held_off(database, "ada", "10.0.0.2")[1] > 0


def test_a_password_change_ends_the_other_sessions_and_revokes_the_tokens(database: Database, add_account) -> None:
    add_account("ada", Role.editor)
    with database.writing() as session:
        ada = store.get_account(session, "ada")
        kept = store.start_session(session, ada, store.FAILURE_WINDOW)
        other = store.start_session(session, ada, store.FAILURE_WINDOW)
        _, token = store.create_api_token(session, ada.id, "ci", None)
        revoked, _ = store.create_api_token(session, ada.id, "old", None)
        store.revoke_api_token(session, ada.id, revoked.id)
    new_hash = store.hash_password("a-new-long-password")
    with database.writing() as session:
        signed_out = store.set_password(session, store.get_account(session, "ada"), new_hash, True, keep_session=kept)
    assert signed_out == store.SignedOut(sessions=1, tokens=1)
    with database.read_session() as session:
        assert store.resolve_session(session, kept).name == "ada"
        assert store.resolve_session(session, other) is None
        assert store.resolve_api_token(session, token) is None
        assert store.check_password(store.password_hash_of(session, "ada"), "a-new-long-password")


def test_without_signing_out_a_password_change_leaves_sessions_and_tokens(database: Database, add_account) -> None:
    add_account("ada", Role.editor)
    with database.writing() as session:
        ada = store.get_account(session, "ada")
        cookie = store.start_session(session, ada, store.FAILURE_WINDOW)
        _, token = store.create_api_token(session, ada.id, "ci", None)
    with database.writing() as session:
        ada = store.get_account(session, "ada")
        assert store.set_password(session, ada, store.hash_password("x" * 12), False) == store.SignedOut(0, 0)
    with database.read_session() as session:
        assert store.resolve_session(session, cookie).name == "ada"
        assert store.resolve_api_token(session, token).name == "ada"


def test_new_passwords_have_twelve_characters_or_more() -> None:
    with pytest.raises(ValueError, match="^new password: use at least 12 characters$"):
        store.hash_password("eleven-char")


def test_the_last_admin_can_be_neither_demoted_nor_removed(database: Database, add_account) -> None:
    add_account("root", Role.admin)
    add_account("vi", Role.viewer)
    refusals = {
        "making it editor": lambda session: store.set_role(session, "root", Role.editor),
        "removing it": lambda session: store.remove_account(session, "root"),
    }
    for change, attempt in refusals.items():
        with pytest.raises(store.LastAdmin) as refused, database.writing() as session:
            attempt(session)
        assert str(refused.value) == (
            f"'root' is the last admin: {change} would leave nobody to manage accounts. "
            "Make another account admin first."
        )
    # With a second admin, either may go.
    with database.writing() as session:
        store.set_role(session, "vi", Role.admin)
    with database.writing() as session:
        store.set_role(session, "root", Role.viewer)
    with pytest.raises(store.LastAdmin), database.writing() as session:
        store.remove_account(session, "vi")
    with database.read_session() as session:
        assert [(a.name, a.role) for a in store.list_accounts(session)] == [("root", "viewer"), ("vi", "admin")]
