"""c3's backend: everything that touches the world (NVML, Docker, SSH, HTTP, files).

It never imports textual, rich, c3 or widgets; an import-linter contract in the test suite enforces it.
"""
