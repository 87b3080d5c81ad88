"""Framework adapters. Only the adapter modules import their framework, inside a worker."""
