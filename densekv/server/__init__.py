"""Servers: binaries of the matrix, throwaway processes and clusters, the capability probe."""
