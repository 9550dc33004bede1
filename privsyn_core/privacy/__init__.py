"""The budget: the zCDP ledger, noise sources (exact discrete Gaussian), the planner and the
empirical audit."""
