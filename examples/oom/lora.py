"""LoRA (peft) fine-tune of a small Llama-style model (random weights, bf16)
whose sequences get longer until one does not fit a 5 GiB cap."""
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

import common


def main():
    common.cap(5)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, max_position_embeddings=8192)
    model = get_peft_model(LlamaForCausalLM(cfg).to(torch.bfloat16).cuda(),
                           LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    seq = 256
    for step in range(200):
        if step >= 10 and step % 5 == 0:
            seq = min(seq * 2, 8192)
        ids = torch.randint(0, 32000, (4, seq), device="cuda")
        try:
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        except torch.OutOfMemoryError as e:
            return common.report(step, e, seq=seq)
    common.report(None, None)


if __name__ == "__main__":
    main()
