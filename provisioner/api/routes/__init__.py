"""The API's routes, a module per part: health and metrics, the views, the scheduler's inputs, actions, audit."""
