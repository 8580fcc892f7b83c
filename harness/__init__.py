"""Allreduce experiment harness: measure, compare and reproduce MPI allreduce algorithms."""

__version__ = "0.1.0"
