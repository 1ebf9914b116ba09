"""HTML page routers, one module per page URL (/runs -> runs.py)."""
