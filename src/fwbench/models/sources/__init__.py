"""Model sources: each module reads one kind of model a user has (a file, a callable, a
library architecture) and registers its entry in fwbench.catalog.sources. See that
module for the contract, and docs/your-model.md."""
