"""Commit layer: CommitMessage, TableWrite, ConflictDetection, RetryPolicy, FileStoreCommit."""
