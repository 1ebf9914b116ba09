"""Uploaded PyTorch source, run in a bubblewrap sandbox: ``runner`` starts it and checks its JSON
answer, ``worker`` is the script that runs inside (the standard library and torch only).

Imports nothing else of emuplan, so ``workload/`` can call it; never FastAPI or the database.
"""
