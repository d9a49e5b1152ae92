from . import optimizer  # noqa: F401
