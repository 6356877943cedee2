"""Data shapes of provisioner: facts, demand, descriptions, script documents.

This package imports nothing else of the project, so every other layer
(including the pure ``policy`` package) can share these shapes.
"""
