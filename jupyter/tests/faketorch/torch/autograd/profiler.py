_stack = []


class record_function:
    def __init__(self, name, args=None):
        self.name = name

    def __enter__(self):
        _stack.append(self.name)
        _annotate(self.name, "START")
        return self

    def __exit__(self, *exc):
        _stack.remove(self.name)
        _annotate(self.name, "END")
        return False


def _annotate(name, stage):
    """The allocator's external_annotations, as torch keeps them while the
    history is recorded with global_record_annotations."""
    from ..cuda import memory

    if memory._history is not None and memory._history.get("annotations"):
        memory._annotations.append({"device": 0, "name": name, "stage": stage, "time_us": memory._now_us()})
