"""The application: the daemon that runs the floors below, and the ways operators and schedulers reach it.

Its rooms, each importing only those below it (``pyproject.toml``'s contracts):

- ``cli``: the ``provisioner`` command, directly on the controller or through a daemon's REST API;
- ``daemon``: the composition root (starts and stops the actors) and what it runs beside them;
- ``api``: the REST API (FastAPI routes, bodies, tokens, the server's thread);
- ``surface``: the operator's surface, what operators and the scheduler can see and do, one Protocol;
- ``metrics``: Prometheus metrics computed from the read model at scrape time;
- ``audit``: the hash-chained audit log and the thread that keeps it caught up;
- ``read``: the read side, the cluster-wide read model and the views computed from it.
"""
