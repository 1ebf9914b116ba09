"""Use cases above ``store/``, one module each (``platforms``...): they orchestrate the domain packages
(``results``, ``workload``...) and persist through ``store``; ``api``, ``cli`` and ``demo`` call them."""
