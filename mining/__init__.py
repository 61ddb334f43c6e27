"""kernelmine's top layer: the CLI, task loading, the stages and the dataset store."""

__version__ = "0.1.0"
