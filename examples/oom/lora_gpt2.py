"""peft LoRA on GPT-2 (random weights): c_attn gets LoRA adapters, every
other weight is frozen. The batch doubles until it does not fit a 6 GiB cap
(autocast to bf16, as common.train_step runs). Most saved activations belong to frozen layers (the MLP's GELU after
c_fc): the walk must name c_fc, not the nearest trainable parameter."""
import torch
from peft import LoraConfig, get_peft_model

import common


def main():
    common.cap(6)
    model = get_peft_model(common.gpt2(layers=12), LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn"],
                                                              fan_in_fan_out=True, task_type="CAUSAL_LM"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    batch = 1
    for step in range(200):
        if step >= 5 and step % 3 == 0:
            batch *= 2
        ids = torch.randint(0, model.config.vocab_size, (batch, 1024), device="cuda")
        try:
            common.train_step(model, opt, ids)
        except torch.OutOfMemoryError as e:
            return common.report(step, e, batch=batch)
    common.report(None, None)


if __name__ == "__main__":
    main()
