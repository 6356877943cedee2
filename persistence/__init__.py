"""The fact store and the controller's inputs: the port, its SQLite and etcd backends, replay, snapshots."""
