"""The cluster's shared types and where the metastore keeps them."""
