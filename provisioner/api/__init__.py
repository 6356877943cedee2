"""The REST API: the app and its routes, the bodies it publishes, bearer tokens, body limits, the server thread."""
