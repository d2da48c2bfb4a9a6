"""The course's LocalSGD loop, from Python: each rank steps on its own shard
and the models are averaged every local_sgd_steps optimizer steps
(examples/local_sgd.cpp is the same program in C++).

    with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=8, enabled=True) as local_sgd:
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step(); optimizer.zero_grad()
                local_sgd.step()

On Fashion-MNIST; run it under mpirun for several ranks
(PYTHONPATH=build/python mpirun -np 4 build-py/bin/python examples/local_sgd.py). `batches` (argv[1], default
all) per epoch, 1 epoch.

    PYTHONPATH=build/python build-py/bin/python examples/local_sgd.py 100
"""
import sys

import remat
from remat.train import Accelerator, DataLoader, LocalSGD, load_fashion_mnist


def main():
    batches = int(sys.argv[1]) if len(sys.argv) > 1 else -1
    train = load_fashion_mnist("train")

    model = remat.nn.MLP([784, 256, 256, 10])
    optimizer = remat.optim.AdamW(model.parameters(), lr=2e-3)
    accelerator = Accelerator()
    model, optimizer, loader = accelerator.prepare(model, optimizer, DataLoader(train, batch_size=64, shuffle=True))

    seen, loss_sum = 0, 0.0
    with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=8, enabled=True) as local_sgd:
        for inputs, targets in loader:
            if seen == batches:
                break
            with accelerator.accumulate(model):
                loss = remat.cross_entropy(model(inputs), targets)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                local_sgd.step()
            loss_sum += loss.item()
            seen += 1
    # leaving the block averaged the models once more, unless the last steps just were
    accelerator.print(f"{accelerator.num_processes} rank(s), {seen} batches each: mean loss {loss_sum / seen:.4f}, "
                      f"{local_sgd.syncs} averages, {accelerator.allreduce_calls} allreduce calls")


if __name__ == "__main__":
    main()
