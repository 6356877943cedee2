"""The daemon: the composition root (``root``), its reload, reset guard, snapshots, commit hooks and pid file."""
