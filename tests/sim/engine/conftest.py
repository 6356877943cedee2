from tests.support.daemons import start_daemon  # noqa: F401  (the fixture, for the live comparison)
