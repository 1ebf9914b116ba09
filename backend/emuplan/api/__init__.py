"""HTTP edge: JSON API routers (each with its prefix) and HTML pages. Only glue: the numbers come from
``workload/`` and ``results/``, storage from ``store/``, planning from ``emuplan.services.plans``.

``errors`` is the one exception → response table (registered by ``create_app``), ``uploads`` the body
size limit and the multipart parser, ``jobs`` the background measurement jobs. May import every
package except ``cli``.
"""
