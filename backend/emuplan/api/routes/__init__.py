"""JSON routers, one module per URL prefix (/api/runs -> runs.py)."""
