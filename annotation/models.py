"""Review data model (labels, campaigns, queues)."""
