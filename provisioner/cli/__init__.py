"""``provisioner``, the command line: views, inputs and actions, on the controller or through a daemon's REST API."""
