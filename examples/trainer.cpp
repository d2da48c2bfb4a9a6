// The course's first way: Hugging Face's Trainer with gradient checkpointing.
//
//   training_args = TrainingArguments(output_dir="./results", evaluation_strategy="epoch",
//                                     gradient_accumulation_steps=4, gradient_checkpointing=True)
//   trainer = Trainer(model=model, args=training_args, train_dataset=dataset["train"],
//                     eval_dataset=dataset["validation"], compute_metrics=compute_metrics)
//   trainer.train()
//
// Here on Fashion-MNIST (Debian's dataset-fashion-mnist), an MLP. Any other
// Trainer argument may follow on the command line (--max_steps 50).
#include <string>
#include <vector>

#include "nn/mlp.h"
#include "data/fashion_mnist.h"
#include "train/metrics.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  using namespace remat;
  const data::Dataset train = data::load_fashion_mnist("train");
  const data::Dataset validation = data::load_fashion_mnist("test");
  nn::MLP model({784, 256, 256, 10});

  train::TrainingArguments args{.output_dir = "./results", .gradient_accumulation_steps = 4,
                                .gradient_checkpointing = true};
  args.eval_strategy = "epoch";
  args.learning_rate = 2e-3;
  args.per_device_train_batch_size = 64;
  train::apply_flags(args, std::vector<std::string>(argv + 1, argv + argc));

  train::Trainer trainer(model, args, train, &validation, train::classification_metrics);
  trainer.train();
  // {'epoch': 1.0, 'eval_loss': 0.36, 'eval_accuracy': 0.86, 'eval_f1': 0.86, ...}
}
