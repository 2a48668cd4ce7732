"""S3FileIO and its parts (boto3 and botocore are imported only here)."""
