"""Inference workloads for the GPU measurements of issue #27 (examples/inference/).

Every model is built from a transformers config with random weights (the GPU
machine has no network): GPT-2 medium (24 layers, 1024 wide, 16 heads) in
bf16 holds 96 KiB of KV cache per token. Each workload is a function of one
iteration, so cost.py can time iterations and record.py can reuse them.
"""
import torch


def gpt2(layers=24, embd=1024, heads=16, positions=2048, dtype=torch.bfloat16):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=heads, n_positions=positions)
    return GPT2LMHeadModel(cfg).to(device="cuda", dtype=dtype).eval()


def llama(layers=2, hidden=256, heads=4, inter=688, vocab=32000, positions=2048, dtype=torch.bfloat16):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=heads, vocab_size=vocab, max_position_embeddings=positions)
    return LlamaForCausalLM(cfg).to(device="cuda", dtype=dtype).eval()


def prompt(model, batch, length):
    return torch.randint(0, model.config.vocab_size, (batch, length), device="cuda")


GENERATE_KW = {}  # added to every generate call's arguments (cost.py --tokens: a criterion that times each token)


def generate(model, batch=16, prompt_len=64, new=128, ids=None, **kw):
    """One batch `generate` call (greedy, exactly `new` tokens)."""
    ids = prompt(model, batch, prompt_len) if ids is None else ids
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                              do_sample=False, use_cache=True, pad_token_id=0, **GENERATE_KW, **kw)


def eval_batch(model, batch=16, length=512):
    """One forward of an evaluation loop (GPT-2 124M-sized in cost.py)."""
    ids = prompt(model, batch, length)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=False)
        return out.logits.argmax(-1)


def serve_request(model, i, new=16):
    """One request of a serving loop: a batch of 1..8 prompts (cycling), `new` tokens."""
    return generate(model, batch=1 + i % 8, prompt_len=32 + 8 * (i % 5), new=new)


def gpt2_small():
    return gpt2(layers=12, embd=768, heads=12, positions=1024)


# How many different iterations a workload cycles through: iteration i does
# what iteration i + SHAPES[name] does (serve: 8 batch sizes x 5 prompt
# lengths), so cost.py compares each call with the same call in the off blocks.
SHAPES = {"serve": 40}

# workload name -> (model builder, one iteration)
WORKLOADS = {
    "generate": (gpt2, lambda m, i: generate(m)),
    # the same generation, 32 new tokens: a call of ~0.4 s, so that a few seconds' block holds several
    "generate32": (gpt2, lambda m, i: generate(m, new=32)),
    "eval": (gpt2_small, lambda m, i: eval_batch(m)),
    "serve": (gpt2, serve_request),
}
