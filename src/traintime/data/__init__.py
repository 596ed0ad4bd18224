"""Data: retrieval (download or offline mirror, sha256-checked) and canonical tables."""
