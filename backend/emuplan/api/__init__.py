"""HTTP edge. Only glue: the numbers come from ``workload/`` and ``results/``, storage from ``store/``,
planning from ``emuplan.planning``. May import every package except ``cli``.

- ``routes/``: the JSON routers, one module per URL prefix (``/api/runs`` -> ``routes/runs.py``);
- ``pages/``: the HTML page routers, one module per page URL (``/runs`` -> ``pages/runs.py``), each rendering
  with ``render.py``'s one ``render``;
- beside them the helpers: ``urls`` (every path built from a route's name), ``errors`` and ``error_pages``
  (an ``EmuplanError``'s own status and headers, as JSON or a page), ``access`` (sign-in and roles), ``deps``,
  ``uploads`` (the body limit and the multipart parser), ``request_guard``, ``responses``, ``static_files``,
  ``memory``, ``password_checks``, and the jobs' modules (``jobs``, ``simulation_jobs``, ``job_threads``).
"""
