# gunicorn ships no annotations: the parts extender/ uses (stubs/README.md).
version_info: tuple[int, int, int]
__version__: str
SERVER: str
SERVER_SOFTWARE: str
