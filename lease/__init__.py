"""Ownership leases: who may act for a provider (or as the planner) right now."""
