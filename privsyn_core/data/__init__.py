"""From a raw table to integer codes and back: reading files, schemas, codecs, per-value reading.
Reads private rows (to encode them)."""
