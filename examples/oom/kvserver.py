"""A serving module's global server object: per session, a list of
per-layer objects holding that layer's keys and values (copied out of the
model's cache), never evicted. Imported by nested_cache.py."""


class LayerKV:
    __slots__ = ("k", "v")

    def __init__(self, k, v):
        self.k, self.v = k, v


class Server:
    def __init__(self):
        self.sessions = {}

    def keep(self, session, cache):
        """Keep a session's keys and values, layer by layer."""
        self.sessions[session] = [LayerKV(k.clone(), v.clone()) for k, v in _pairs(cache)]


def _pairs(cache):
    """Each layer's (keys, values), whichever layout this transformers uses."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(layer[0], layer[1]) for layer in cache]


SERVER = Server()
