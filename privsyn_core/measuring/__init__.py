"""Every measurement of the private table: the counting interface and its backends (NumPy, DuckDB,
Spark), the structure step, private domains, 1-way marginals, InDif, Gaussian marginals. With
data/, the only code that reads private rows."""
