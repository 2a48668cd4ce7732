"""Writers: rows to data files and CommitMessages (append, key-value), schema merge on write."""
