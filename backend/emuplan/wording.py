"""Words the CLI, the pages and the exports share: counts that agree in number ("1 host", "4 hosts")."""


def plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else (many or one + 's')}"
