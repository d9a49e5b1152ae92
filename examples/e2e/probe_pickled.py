import torch
print([n for n in dir(torch._C) if "napshot" in n or "emory_snap" in n])
