"""Server fixtures: binaries of the matrix, throwaway processes and clusters, the embedded
server, RDB headers. (The capability probe is runtime: densekv/capabilities.py.)"""
