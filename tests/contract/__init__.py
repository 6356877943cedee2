"""The controller contract: every backend must pass these tests unchanged."""
