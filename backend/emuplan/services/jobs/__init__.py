"""Background jobs: ``engine.py`` runs any kind (threads, heartbeat, cancel; the rows are ``store/jobs.py``'s), and
each kind is one ``engine.Job`` subclass in a module of its own: ``measurement.py``, ``simulation.py``,
``relabel.py``."""
