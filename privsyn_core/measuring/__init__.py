"""Every measurement of the private table: the structure step, private domains, 1-way
marginals, InDif, PrivBayes's network, Gaussian marginals, each adding noise to exact counts
that the counting backends of :mod:`privsyn_core.measuring.counters` (in memory, DuckDB, Spark)
return. With data/, the only code that reads private rows."""
