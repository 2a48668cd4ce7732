"""Commit layer: CommitMessage, ConflictDetection, RetryPolicy, FileStoreCommit.

FileStoreCommit dispatches each call to a named producer (AppendFiles,
CompactFiles, OverwriteFiles; RewriteManifests for a manifest merge) over one
SnapshotCommit, the publishing loop, which retries lost races with the
RetryPolicy (so does the schema publish of ``schema_alter``).
"""
