"""JSON routers, each module named after the URL prefix it serves (``/api/measurements`` -> ``measurements.py``)."""
