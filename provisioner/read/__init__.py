"""The read side: the cluster-wide read model (``model``), the operator's views of it, who holds which lease."""
