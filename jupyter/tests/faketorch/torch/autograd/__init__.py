from .. import _log
from . import profiler


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    _log("autograd.backward", tuple(profiler._stack))
