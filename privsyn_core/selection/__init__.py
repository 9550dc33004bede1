"""Choosing marginals from noisy measurements: greedy selection (Algorithm 1), combining (Algorithm
2), the marginal graph. Post-processing: reads no rows."""
