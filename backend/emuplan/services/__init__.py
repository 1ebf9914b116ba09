"""Use cases above ``store/``, one module each: ``imports`` (a result file becomes a run), ``runs`` (edit, relabel
and read a run), ``comparisons``, ``trend``, ``plans``, ``measurements``, ``simulations``... They orchestrate the
domain packages (``results``, ``workload``, ``charts``...) and persist through ``store``; ``api``, ``cli`` and
``demo`` call them."""
