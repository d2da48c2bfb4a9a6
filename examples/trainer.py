"""The course's first way, from Python: transformers' Trainer with gradient
checkpointing (examples/trainer.cpp is the same program in C++).

    training_args = TrainingArguments(output_dir="./results", evaluation_strategy="epoch",
                                      gradient_accumulation_steps=4, gradient_checkpointing=True)
    trainer = Trainer(model=model, args=training_args, train_dataset=dataset["train"],
                      eval_dataset=dataset["validation"], compute_metrics=compute_metrics)
    trainer.train()

Here on Fashion-MNIST (Debian's dataset-fashion-mnist), an MLP. Any other
Trainer argument may follow as --name value (--max_steps 50).

    PYTHONPATH=build/python build-py/bin/python examples/trainer.py --max_steps 50
"""
import sys

import numpy as np

import remat
from remat.train import Trainer, TrainingArguments, load_fashion_mnist


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float(np.mean(np.argmax(logits, axis=-1) == labels))}


def main():
    train = load_fashion_mnist("train")
    validation = load_fashion_mnist("test")
    model = remat.nn.MLP([784, 256, 256, 10])

    training_args = TrainingArguments(output_dir="./results", evaluation_strategy="epoch",
                                      gradient_accumulation_steps=4, gradient_checkpointing=True,
                                      learning_rate=2e-3, per_device_train_batch_size=64)
    training_args.apply_flags(sys.argv[1:])  # --max_steps 50: read and checked as the keywords are
    trainer = Trainer(model=model, args=training_args, train_dataset=train, eval_dataset=validation,
                      compute_metrics=compute_metrics)
    trainer.train()
    # {'epoch': 1.0, 'eval_loss': 0.36, 'eval_accuracy': 0.86, ...}


if __name__ == "__main__":
    main()
