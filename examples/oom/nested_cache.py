"""Serving until the device is full: each request's prompt goes through
GPT-2 with use_cache, and the server (kvserver.SERVER) keeps the session's
per-layer keys and values in a list of per-layer objects in a dict of a
global object, never evicting (151 MB a session); under a 6 GiB cap a new session
no longer fits after ~30. The current request's transformers DynamicCache is alive too
(a local), named as a key/value cache."""
import torch

import common
import kvserver


@torch.no_grad()
def main():
    common.cap(6)
    model = common.gpt2(layers=12).eval()
    for session in range(1000):
        ids = torch.randint(0, model.config.vocab_size, (2, 1024), device="cuda")
        try:
            out = model(input_ids=ids, use_cache=True)
            kvserver.SERVER.keep("s%d" % session, out.past_key_values)
        except torch.OutOfMemoryError as e:
            return common.report(session, e, sessions=len(kvserver.SERVER.sessions))
    common.report(None, None)


if __name__ == "__main__":
    main()
