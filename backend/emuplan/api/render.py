"""The one ``render`` of every HTML page (``api/pages/``), and the filters its templates use.

Each page renders what the JSON API's query functions return; the numbers are computed once, in the domain
and store modules, never here or in the browser. Charts are fetched by small ES modules from the JSON twins,
because the Content-Security-Policy allows no inline script."""

from functools import lru_cache, partial
from pathlib import Path

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup, escape

from emuplan.api.urls import route_table, url_path
from emuplan.charts.figures import COMPARISON_DELAY_POINTS, OVERLAY_POINTS, SMALL_PANEL_POINTS
from emuplan.results.run_fields import RUN_FIELDS
from emuplan.roles import Role
from emuplan.store import runs as run_rows
from emuplan.store.tables import Run
from emuplan.wording import (
    against_median,
    as_printed,
    gbps,
    parallel_degrees,
    percent,
    plural,
    ratio,
    size_range,
    thousands,
    time_in,
    time_with_unit,
    to_the_minute,
)


def origin_badge(run: run_rows.RunBase | Run) -> Markup:
    """Where a run came from, as a badge whose tooltip says how."""
    return _origin_badge(run.origin, run.origin_detail)


def tag_badges(tags: list[str]) -> Markup:
    """A run's tags as badges, each followed by a space."""
    return _tag_badges(tuple(tags))


# A list page shows the same few origins and tag sets on most of its rows: each is written once, not once a row
# (formatting and escaping them again was a quarter of the time /runs took to render 50 rows).
@lru_cache(maxsize=256)
def _origin_badge(origin: str, detail: str) -> Markup:
    return Markup(f'<span class="badge origin-{escape(origin)}" title="{escape(detail)}">{escape(origin)}</span>')


@lru_cache(maxsize=256)
def _tag_badges(tags: tuple[str, ...]) -> Markup:
    return Markup("".join([f'<span class="badge">{escape(tag)}</span> ' for tag in tags]))


def run_sizes(run: run_rows.RunBase | Run) -> str:
    """A run's data sizes as the list shows them (``wording.size_range``)."""
    return size_range(run.size_min_bytes, run.size_max_bytes)


def run_total(count: run_rows.RunCount) -> Markup:
    """How many runs match, as a pager says it: the count, or "about" PostgreSQL's estimate to two figures."""
    if count.exact:
        return Markup(thousands(count.value))
    rounded = round(count.value, 2 - len(str(count.value)))
    why = f"PostgreSQL's estimate: runs are counted exactly up to {thousands(run_rows.EXACT_COUNT_LIMIT)}"
    return Markup(f'<span class="estimate" title="{why}">about {thousands(rounded)}</span>')


def origins(runs: list[run_rows.RunBase | Run]) -> set[str]:
    """The origins among ``runs``: the notes under a list ask it once, not once a note (Jinja's selectattr)."""
    return {run.origin for run in runs}


@lru_cache
def _environment(templates_dir: Path) -> Environment:
    # Autoescape everything: run names, tags, model and file names are user input.
    environment = Environment(
        loader=FileSystemLoader(templates_dir), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    environment.filters.update(
        plural=plural,
        thousands=thousands,
        to_the_minute=to_the_minute,
        as_printed=as_printed,
        time_in=time_in,
        time_with_unit=time_with_unit,
        gbps=gbps,
        percent=percent,
        ratio=ratio,
        against_median=against_median,
        origin_badge=origin_badge,
        tag_badges=tag_badges,
        origins=origins,
        run_sizes=run_sizes,
        run_total=run_total,
        parallel_degrees=parallel_degrees,
    )
    # What a comparison page says of its thinned charts is the number the figures were built with; the forms
    # that state a run's fields label and bound them as the API does.
    environment.globals.update(
        run_fields=RUN_FIELDS,
        comparison_delay_points=COMPARISON_DELAY_POINTS,
        comparison_overlay_points=OVERLAY_POINTS,
        comparison_panel_points=SMALL_PANEL_POINTS,
    )
    return environment


def render(
    request: Request, template: str, status_code: int = 200, headers: dict | None = None, **context
) -> HTMLResponse:
    environment = _environment(request.app.state.settings.frontend_dir / "templates")
    # Set by the role check (api/access.py) on the pages that need an account; None with sign-in off.
    signed_in = getattr(request.state, "signed_in", None)
    html = environment.get_template(template).render(
        request=request,
        static_url=request.app.state.static_files.url,
        url=partial(url_path, request.app),
        route_table=route_table(request.app),
        signed_in=signed_in,
        # Controls whose requests the account's role would be refused are left out of the page.
        may=lambda needed: signed_in is None or signed_in.role.permits(Role(needed)),
        **context,
    )
    return HTMLResponse(html, status_code=status_code, headers=headers)
