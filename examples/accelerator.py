"""The course's second way, from Python: an Accelerate loop with gradient
accumulation 2 and the model's gradient checkpointing (examples/accelerator.cpp
is the same program in C++).

    accelerator = Accelerator(gradient_accumulation_steps=2)
    model.gradient_checkpointing_enable()
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step(); optimizer.zero_grad()

A small GPT on random tokens; `steps` (argv[1], default 20) micro-batches.

    PYTHONPATH=build/python build-py/bin/python examples/accelerator.py 20
"""
import sys

import remat
from remat.train import Accelerator, DataLoader, Dataset


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    tokens = Dataset(remat.randint(64, [256, 32], seed=0), remat.randint(64, [256, 32], seed=1))

    model = remat.nn.GPT(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=64, dropout=0.1)
    model.gradient_checkpointing_enable()  # per block, as Hugging Face's
    optimizer = remat.optim.AdamW(model.parameters(), lr=3e-3)
    loader = DataLoader(tokens, batch_size=16, shuffle=True)
    accelerator = Accelerator(gradient_accumulation_steps=2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    step = 0
    while step < steps:
        for batch in loader:  # one epoch
            if step == steps:
                break
            step += 1
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            report = model.checkpointing_report()
            accelerator.print(f"micro-batch {step}: loss {loss.item():.4f}; sync {accelerator.sync_gradients}; "
                              f"peak activations {report['peak_activation_bytes']} bytes")


if __name__ == "__main__":
    main()
