"""The demo job and its data loader (not part of the installed package)."""
