"""The audit log: one hash-chained JSON line per audited fact (``log``), kept caught up by a thread (``auditor``)."""
