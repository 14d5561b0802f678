"""Real servers for the tests: an Elasticsearch-API server and an S3 server (session fixtures).

Filled in by the Elasticsearch and S3 issues.
"""

from __future__ import annotations
