"""What runs inside the user's job: attach (_agent), the daemon link (_link),
the sampled recording (_schedule), out-of-memory captures and agent.dump
(_capture, _snapfile, _vsm), the tensor walk (_tensors, _holders, _globals,
_autograd), per-step levels (_levels), the stack sampler (_stacks), the torch
glue (_torch, _importhook) and the trainers' phases (_phases).

Stdlib only; it imports torch only once the program has. It never imports
vramscope.notebook. This file stays empty: the bootstrap imports the package in
every process started under `vramscope run`.
"""
