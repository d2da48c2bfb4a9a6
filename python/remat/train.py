"""remat.train: the course's two ways of training, as Hugging Face writes them.

The Trainer (transformers' names and defaults; gradient checkpointing planned
by remat's cost model):

    args = TrainingArguments(output_dir="./results", eval_strategy="epoch",
                             gradient_accumulation_steps=4, gradient_checkpointing=True)
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=validation,
                      compute_metrics=compute_metrics)
    trainer.train()

The Accelerator loop, with LocalSGD:

    accelerator = Accelerator(gradient_accumulation_steps=2)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=8, enabled=True) as local_sgd:
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
                local_sgd.step()

Every class here is the C++ engine's own (train/trainer.h, train/accelerator.h,
train/local_sgd.h); arguments are checked there, and a bad one raises
remat.Error naming it. Under mpirun each process is a rank.
"""
import os
from typing import Any, NamedTuple, Optional

from . import _remat
from ._remat import Batch, Dataset, Error, PreparedOptimizer, PreparedScheduler, load_fashion_mnist
from .nn import Module
from .optim import LRScheduler, Optimizer

__all__ = ["TrainingArguments", "Trainer", "TrainOutput", "PredictionOutput", "EvalPrediction", "Accelerator",
           "LocalSGD", "Dataset", "DataLoader", "Batch", "load_fashion_mnist", "classification_metrics",
           "perplexity"]


class TrainingArguments:
    """What a Trainer is told, with transformers' names, defaults and meanings
    (train/training_arguments.h lists them). Checked when made: an unknown
    name or a value out of range raises remat.Error naming it. Fields read
    and set as attributes; to_dict() gives them all."""

    def __init__(self, output_dir: Optional[str] = None, **kwargs: Any):
        if output_dir is not None:
            kwargs["output_dir"] = output_dir
        object.__setattr__(self, "_values", _remat._training_arguments(kwargs))

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"TrainingArguments has no field '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        values = dict(self._values)
        values[_remat._training_argument_name(name)] = value  # evaluation_strategy sets eval_strategy
        object.__setattr__(self, "_values", _remat._training_arguments(values))

    def apply_flags(self, argv: list) -> "TrainingArguments":
        """Sets the fields named in command-line flags (--name value or
        --name=value, as the remat program reads them; sys.argv[1:]), each
        read as its field's type and checked. Returns self."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("TrainingArguments.apply_flags: a list of flags (sys.argv[1:]), not one string")
        object.__setattr__(self, "_values", _remat._training_arguments_with_flags(self._values, list(argv)))
        return self

    def to_dict(self) -> dict:
        return dict(self._values)

    def __repr__(self) -> str:
        return "TrainingArguments(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"


class EvalPrediction:
    """What compute_metrics receives: every rank's predictions (N, C) and
    label_ids (N) as NumPy arrays (None for a language model, whose metrics
    come from the loss), and the evaluation's mean loss. Unpacks as
    transformers' does: predictions, label_ids = eval_pred."""

    def __init__(self, predictions, label_ids, loss: float):
        self.predictions, self.label_ids, self.loss = predictions, label_ids, loss

    def __iter__(self):
        return iter((self.predictions, self.label_ids))

    def __getitem__(self, index):
        return (self.predictions, self.label_ids)[index]

    def __len__(self) -> int:
        return 2


class TrainOutput(NamedTuple):
    global_step: int
    training_loss: float
    metrics: dict


class PredictionOutput(NamedTuple):
    predictions: Any
    label_ids: Any
    metrics: dict


def classification_metrics(eval_pred: EvalPrediction) -> dict:
    """accuracy, f1, precision, recall (macro over classes), as evaluate's."""
    predictions, labels = eval_pred[0], eval_pred[1]
    return _remat._classification_metrics(_tensor(predictions), _tensor(labels))


def perplexity(eval_pred: EvalPrediction) -> dict:
    """exp(mean loss): a language model's compute_metrics."""
    return {"perplexity": _remat._perplexity(eval_pred.loss)}


def _tensor(value):
    from . import tensor
    return value if isinstance(value, _remat.Tensor) else tensor(value)


def _metrics_hook(compute_metrics):
    """The C++ side's form of compute_metrics: remat's own run in C++; a
    Python callable gets an EvalPrediction of NumPy arrays."""
    if compute_metrics is None:
        return None
    if compute_metrics is classification_metrics:
        return "classification"
    if compute_metrics is perplexity:
        return "language_model"
    if not callable(compute_metrics):
        raise Error(f"Trainer: compute_metrics must be callable (EvalPrediction) -> dict, not "
                    f"{type(compute_metrics).__name__}")

    def hook(predictions, label_ids, loss):
        return compute_metrics(EvalPrediction(
            None if predictions is None else predictions.numpy(),
            None if label_ids is None else label_ids.numpy(), loss))
    return hook


class TrainerState:
    """trainer.state: the run so far (what trainer_state.json holds)."""

    def __init__(self, trainer):
        self._trainer = trainer  # the Python Trainer: its engine may be remade (train(resume_from_checkpoint=...))

    @property
    def global_step(self) -> int:
        return self._trainer._engine().global_step

    @property
    def epoch(self) -> float:
        return self._trainer._engine().epoch

    @property
    def log_history(self) -> list:
        return self._trainer._engine().log_history

    @property
    def best_model_checkpoint(self) -> Optional[str]:
        return self._trainer._engine().best_model_checkpoint


class Trainer:
    """transformers' Trainer over a remat model: AdamW on the arguments'
    schedule, gradient accumulation, clipping, checkpointing of activations
    (gradient_checkpointing=True), evaluation, saved and resumed runs,
    LocalSGD under mpirun (local_sgd_steps). A GPT trains on (ids, targets)
    rows and is scored by its loss; any other module is a classifier under
    cross-entropy. Logs are printed as dicts, or given to on_log(dict).
    Ctrl-C stops after the current step (saving it, when saving is on) and
    raises KeyboardInterrupt; so does any exception that a signal handler
    or on_log raises, which is raised in turn (one raised inside
    compute_metrics, Ctrl-C included, ends training at once, unsaved)."""

    def __init__(self, model: Module, args: Optional[TrainingArguments] = None, train_dataset: Dataset = None,
                 eval_dataset: Optional[Dataset] = None, compute_metrics=None, on_log=None):
        if train_dataset is None:
            raise Error("Trainer: train_dataset is required (a remat.train.Dataset)")
        self.model = model
        self.args = args if args is not None else TrainingArguments()
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self._metrics = _metrics_hook(compute_metrics)
        self._on_log = on_log
        self._trainer = None
        self._made_with = None

    def _engine(self, resume_from_checkpoint: Optional[str] = None):
        """The C++ Trainer, made again when the arguments changed, or to resume
        (which it does as it starts training); otherwise the same one, whose
        state (trainer.state) is the run so far."""
        values = self.args.to_dict()
        if self._trainer is None or values != self._made_with or resume_from_checkpoint is not None:
            told = values if resume_from_checkpoint is None else {**values,
                                                                 "resume_from_checkpoint": resume_from_checkpoint}
            self._trainer = _remat._Trainer(self.model, told, self.train_dataset, self.eval_dataset,
                                            self._metrics, self._on_log)
            self._made_with = values
        return self._trainer

    @property
    def state(self) -> TrainerState:
        return TrainerState(self)

    def train(self, resume_from_checkpoint=None) -> TrainOutput:
        """Trains; resume_from_checkpoint: a checkpoint folder, or True for the
        newest in output_dir that verifies (it continues bit for bit)."""
        resume = None
        if resume_from_checkpoint is not None and resume_from_checkpoint is not False:
            resume = "latest" if resume_from_checkpoint is True else os.fspath(resume_from_checkpoint)
        out = self._engine(resume).train()
        return TrainOutput(out["global_step"], out["training_loss"], out["metrics"])

    def evaluate(self, eval_dataset: Optional[Dataset] = None, metric_key_prefix: str = "eval") -> dict:
        return self._engine().evaluate(eval_dataset, metric_key_prefix)

    def predict(self, test_dataset: Dataset) -> PredictionOutput:
        predictions, label_ids, metrics = self._engine().predict(test_dataset)
        def numpy(t):
            return None if t is None else t.numpy()
        return PredictionOutput(numpy(predictions), numpy(label_ids), metrics)


class DataLoader:
    """Batches of a Dataset: each `for batch in loader` is one epoch (a new
    order when shuffle is on, fixed by seed and the epoch's number, as
    set_epoch sets it). A batch unpacks as (inputs, targets)."""

    def __init__(self, dataset: Dataset, batch_size: int = 1, shuffle: bool = False, seed: int = 0,
                 drop_last: bool = False):
        self._loader = _remat._DataLoader(dataset, batch_size, shuffle, seed, drop_last)
        self._epoch = 0

    @classmethod
    def _wrapping(cls, loader):
        self = cls.__new__(cls)
        self._loader = loader
        self._epoch = 0
        return self

    @property
    def dataset(self) -> Dataset:
        return self._loader.dataset

    @property
    def batch_size(self) -> int:
        return self._loader.batch_size

    def set_epoch(self, epoch: int) -> None:
        self._epoch = epoch

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self):
        epoch = self._loader.epoch(self._epoch)
        self._epoch += 1
        for i in range(len(epoch)):
            yield epoch.batch(i)


class Accelerator:
    """Accelerate's Accelerator: gradient accumulation (a window of
    gradient_accumulation_steps micro-batches per optimizer step, each loss
    scaled by its share), gradients averaged over the ranks under mpirun."""

    def __init__(self, gradient_accumulation_steps: int = 1, device: str = "cpu"):
        self._accelerator = _remat._Accelerator(gradient_accumulation_steps, device)

    def prepare(self, *objects):
        """The model (its parameters from rank 0), optimizers and schedulers
        that act only when a window ends, and loaders over this rank's
        shard; given back in the same order."""
        prepared = []
        for obj in objects:
            if isinstance(obj, Module):
                self._accelerator.prepare_model(obj)
                prepared.append(obj)
            elif isinstance(obj, Optimizer):
                prepared.append(self._accelerator.prepare_optimizer(obj))
            elif isinstance(obj, LRScheduler):
                prepared.append(self._accelerator.prepare_scheduler(obj))
            elif isinstance(obj, DataLoader):
                prepared.append(DataLoader._wrapping(self._accelerator.prepare_loader(obj._loader)))
            else:
                raise Error(f"Accelerator.prepare: cannot prepare a {type(obj).__name__} (a model, optimizer, "
                            f"LR scheduler or DataLoader)")
        return prepared[0] if len(prepared) == 1 else tuple(prepared)

    def accumulate(self, model: Module):
        """`with accelerator.accumulate(model):` around each micro-batch."""
        return self._accelerator.accumulate(model)

    def backward(self, loss) -> None:
        self._accelerator.backward(loss)

    def gather(self, tensor):
        return self._accelerator.gather(tensor)

    def print(self, *args, **kwargs) -> None:
        """print on the main process only."""
        if self.is_main_process:
            print(*args, flush=True, **kwargs)

    @property
    def sync_gradients(self) -> bool:
        return self._accelerator.sync_gradients

    @property
    def gradient_accumulation_steps(self) -> int:
        return self._accelerator.gradient_accumulation_steps

    @property
    def num_processes(self) -> int:
        return self._accelerator.num_processes

    @property
    def process_index(self) -> int:
        return self._accelerator.process_index

    @property
    def is_main_process(self) -> bool:
        return self._accelerator.is_main_process

    @property
    def device(self) -> str:
        return self._accelerator.device

    @property
    def allreduce_calls(self) -> int:
        """Allreduce calls so far on this rank's communicator."""
        return self._accelerator.allreduce_calls


class LocalSGD:
    """Accelerate's LocalSGD: inside the `with` block each rank takes
    local_sgd_steps optimizer steps on its own, then the ranks average their
    models; leaving the block averages once more, unless the last steps were
    just averaged. With one process, or enabled=False, nothing is
    communicated.

    Two differences from Accelerate, both on purpose. step() may be called
    once per micro-batch, as the course does, but only optimizer steps count
    (the end of an accumulation window): local_sgd_steps=8 with
    gradient_accumulation_steps=2 averages every 8 optimizer steps, not
    every 4. A block left by an exception does not average (the other ranks
    may never reach that collective, and it would hang them); call finish()
    first to average anyway."""

    def __init__(self, accelerator: Accelerator, model: Module, local_sgd_steps: int = 8, enabled: bool = True):
        self._scope = _remat._LocalSGD(accelerator._accelerator, model, local_sgd_steps, enabled)

    def __enter__(self):
        self._scope.enter()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._scope.exit(exc_type is not None)
        return False

    def step(self) -> None:
        """Once per micro-batch, after the optimizer's step."""
        self._scope.step()

    def finish(self) -> None:
        """The last average now (leaving the block then adds none)."""
        self._scope.finish()

    @property
    def num_steps(self) -> int:
        """Optimizer steps counted so far."""
        return self._scope.steps

    @property
    def syncs(self) -> int:
        """Averages done so far."""
        return self._scope.syncs
