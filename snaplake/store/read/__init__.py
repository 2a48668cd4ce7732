"""Planning and reading: scan, predicates, splits read into Arrow."""
