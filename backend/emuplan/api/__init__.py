"""HTTP edge. Only glue: the numbers come from ``workload/`` and ``results/``, the use cases from ``services/``
(planning: ``emuplan.services.plans``), rows from ``store/``. May import every package except ``cli``.

- ``routes/``: the JSON routers, one module per URL prefix (``/api/runs`` -> ``routes/runs.py``);
- ``pages/``: the HTML page routers, one module per page URL (``/runs`` -> ``pages/runs.py``), each rendering
  with ``render.py``'s one ``render``;
- beside them the helpers: ``urls`` (every path built from a route's name), ``errors`` and ``error_pages``
  (an ``EmuplanError``'s own status and headers, as JSON or a page), ``access`` (sign-in and roles), ``deps``,
  ``uploads`` (the body limit and the multipart parser), ``request_guard``, ``responses``, ``static_files``,
  ``memory`` and ``password_checks``. Long work runs as a job (``emuplan.services.jobs``), followed through
  ``routes/jobs.py`` and its kind's own routes.
"""
