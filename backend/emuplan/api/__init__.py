"""HTTP edge: JSON API routers and HTML pages. Only glue: the numbers come from workload/ and results/."""
