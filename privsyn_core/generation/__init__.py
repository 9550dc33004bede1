"""Consistency, GUM and its compiled kernel, sampling, memory checks: post-processing of
measurements, reads no rows."""
