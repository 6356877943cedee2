"""What an operator configures: the models, and reading them from files with errors that name the line."""
