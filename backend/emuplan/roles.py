"""Who may do what when sign-in is on (``EMUPLAN_AUTH=accounts``): three roles, each including the one below.

Kept apart from the store and the API so that the CLI's ``--role`` option can name the roles without
importing either.
"""

from enum import StrEnum


class Role(StrEnum):
    viewer = "viewer"  # reads runs, plans, comparisons and figures
    editor = "editor"  # also plans, uploads, measures and shares; renames, tags, annotates and links
    admin = "admin"  # also deletes runs, plans and comparisons; manages accounts (/admin, emuplan users)

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def permits(self, needed: "Role") -> bool:
        return self.rank >= needed.rank


# What each role may do beyond the roles below it.
ROLE_DUTIES = {
    Role.viewer: "read runs, plans and comparisons",
    Role.editor: "read, plan, upload, measure and share",
    Role.admin: "read, plan, upload, measure, share, delete runs, plans and comparisons and manage accounts",
}
