"""FileIO backends: local disk, memory, S3 (``io/s3/``)."""
