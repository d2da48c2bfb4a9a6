"""The course's API from Python: TrainingArguments checked as the C++ reader
checks them, the Trainer equal to the C++ one step for step, the Accelerator's
windows, LocalSGD's block, schedules with transformers' factors, and the three
course programs (examples/*.py) run as a user runs them."""
import json
import math
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import remat
from remat.train import (Accelerator, DataLoader, Dataset, LocalSGD, Trainer, TrainingArguments,
                         classification_metrics, load_fashion_mnist)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FASHION = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
needs_fashion = pytest.mark.skipif(not os.path.exists(FASHION), reason="dataset-fashion-mnist is not installed")


def run_example(name, *args, cwd, env_extra=None, launcher=()):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([*launcher, sys.executable, os.path.join(ROOT, "examples", name), *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


# --- TrainingArguments -------------------------------------------------------

def test_training_arguments_have_transformers_defaults_and_check_values():
    args = TrainingArguments("out", eval_strategy="epoch", gradient_accumulation_steps=4)
    assert (args.output_dir, args.eval_strategy, args.gradient_accumulation_steps) == ("out", "epoch", 4)
    assert (args.learning_rate, args.num_train_epochs, args.per_device_train_batch_size) == (5e-5, 3, 8)
    assert args.lr_scheduler_type == "linear" and args.seed == 42
    assert TrainingArguments(evaluation_strategy="steps").eval_strategy == "steps"  # the older name
    with pytest.raises(remat.Error, match="unknown training argument 'learnin_rate'"):
        TrainingArguments(learnin_rate=1e-3)
    with pytest.raises(remat.Error, match="learning_rate"):
        TrainingArguments(learning_rate="fast")
    with pytest.raises(remat.Error, match="gradient_accumulation_steps"):
        TrainingArguments(gradient_accumulation_steps=0)
    args.learning_rate = 1e-3
    assert args.learning_rate == 1e-3
    with pytest.raises(remat.Error, match="eval_strategy"):
        args.eval_strategy = "sometimes"
    assert args.eval_strategy == "epoch"  # a refused value changes nothing
    args.evaluation_strategy = "steps"  # the older name sets the field
    assert args.eval_strategy == "steps"
    args.apply_flags(["--max_steps", "7", "--lr_scheduler_type=cosine", "--evaluation-strategy", "no"])
    assert (args.max_steps, args.lr_scheduler_type, args.eval_strategy) == (7, "cosine", "no")
    with pytest.raises(remat.Error, match="max_steps"):
        args.apply_flags(["--max_steps", "many"])
    assert args.max_steps == 7
    with pytest.raises(TypeError, match="a list of flags"):
        args.apply_flags("--max_steps 5")
    args.max_steps, args.gradient_checkpointing, args.output_dir = np.int32(9), np.True_, pathlib.Path("there")
    assert (args.max_steps, args.gradient_checkpointing, args.output_dir) == (9, True, "there")
    with pytest.raises(remat.Error, match=r"learning_rate: an array of shape \(2,\)"):
        args.learning_rate = np.array([1e-3, 2e-3])
    with pytest.raises(AttributeError, match="no field 'nope'"):
        args.nope
    kwargs = TrainingArguments(gradient_checkpointing=True,
                               gradient_checkpointing_kwargs={"policy": "chain", "budget": "1MiB"}).to_dict()
    assert kwargs["gradient_checkpointing_kwargs"]["policy"] == "chain"
    assert kwargs["gradient_checkpointing_kwargs"]["budget"] == 1 << 20


# --- Trainer ---------------------------------------------------------------

@pytest.fixture(scope="module")
def fashion():
    if not os.path.exists(FASHION):
        pytest.skip("dataset-fashion-mnist is not installed")
    return load_fashion_mnist("train").select(list(range(2048))), load_fashion_mnist("test").select(list(range(512)))


def test_trainer_learns_and_hands_compute_metrics_an_eval_prediction(fashion, tmp_path):
    train, validation = fashion
    seen = []

    def compute_metrics(eval_pred):
        logits, labels = eval_pred
        seen.append((logits.shape, labels.shape, eval_pred.loss))
        return {"accuracy": float(np.mean(np.argmax(logits, axis=-1) == labels))}

    logs = []
    args = TrainingArguments(str(tmp_path / "run"), eval_strategy="epoch", num_train_epochs=2,
                             per_device_train_batch_size=64, learning_rate=2e-3, logging_steps=8,
                             gradient_accumulation_steps=2, gradient_checkpointing=True)
    model = remat.nn.MLP([784, 64, 10], seed=1)
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=validation,
                      compute_metrics=compute_metrics, on_log=logs.append)
    out = trainer.train()
    assert out.global_step == 2 * 2048 // 128 == trainer.state.global_step
    assert seen and seen[0][0] == (512, 10) and seen[0][1] == (512,)
    evals = [log for log in trainer.state.log_history if "eval_accuracy" in log]
    assert len(evals) == 2 and evals[-1]["eval_accuracy"] > 0.6 and evals[-1]["eval_loss"] == seen[-1][2]
    assert [log for log in logs if "loss" in log][0]["loss"] > out.training_loss * 0.9
    assert model.is_gradient_checkpointing
    # save_steps 500: saved at the end only
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if p.name.startswith("checkpoint-")) == ["checkpoint-32"]
    metrics = trainer.evaluate()
    assert metrics["eval_accuracy"] == pytest.approx(evals[-1]["eval_accuracy"])
    prediction = trainer.predict(validation)
    assert prediction.predictions.shape == (512, 10)
    ours = classification_metrics((prediction.predictions, prediction.label_ids))
    assert ours["accuracy"] == pytest.approx(np.mean(prediction.predictions.argmax(-1) == prediction.label_ids))
    assert prediction.metrics["test_accuracy"] == pytest.approx(ours["accuracy"])


def test_trainer_equals_the_cpp_trainer_step_for_step(fashion, tmp_path):
    """examples/trainer.py and examples/trainer.cpp run the same arguments on the
    same data and model: the same losses, to the last digit printed."""
    binary = os.environ.get("REMAT_EXAMPLE_TRAINER")
    if not binary:
        pytest.skip("REMAT_EXAMPLE_TRAINER (the C++ example_trainer) not given")
    flags = ["--max_steps", "6", "--logging_steps", "2", "--save_strategy", "no"]
    cpp = subprocess.run([binary, *flags], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert cpp.returncode == 0, cpp.stderr
    py = run_example("trainer.py", *flags, cwd=tmp_path)
    assert py.returncode == 0, py.stderr

    def losses(text):
        return [line for line in text.splitlines() if line.startswith("{'loss'")]
    assert len(losses(cpp.stdout)) == 3
    assert losses(py.stdout) == losses(cpp.stdout)


def test_trainer_saves_and_resumes(fashion, tmp_path):
    train, _ = fashion
    # a constant rate: a linear schedule's slope would depend on max_steps
    args = dict(per_device_train_batch_size=64, save_steps=4, logging_steps=100, learning_rate=1e-3,
                lr_scheduler_type="constant")
    whole = remat.nn.MLP([784, 32, 10], seed=3)
    Trainer(model=whole, args=TrainingArguments(str(tmp_path / "a"), max_steps=8, **args), train_dataset=train).train()
    halves = remat.nn.MLP([784, 32, 10], seed=3)
    Trainer(model=halves, args=TrainingArguments(str(tmp_path / "b"), max_steps=4, **args), train_dataset=train).train()
    resumed = remat.nn.MLP([784, 32, 10], seed=99)  # its own weights: the checkpoint's replace them
    trainer = Trainer(model=resumed, args=TrainingArguments(tmp_path / "b", max_steps=np.int64(8), **args),
                      train_dataset=train)
    out = trainer.train(resume_from_checkpoint=True)
    assert out.global_step == 8 and trainer.state.global_step == 8  # the resumed run's state, not a new one's
    for (name, a), (_, b) in zip(whole.named_parameters(), resumed.named_parameters()):
        assert np.array_equal(a.numpy(), b.numpy()), name
    state = json.loads((tmp_path / "b" / "checkpoint-8" / "trainer_state.json").read_text())
    assert state["global_step"] == 8


@pytest.mark.parametrize("sent, raised", [(signal.SIGINT, "KeyboardInterrupt"), (signal.SIGTERM, "TimeoutError")])
def test_trainer_stops_on_a_signal_after_saving(tmp_path, sent, raised):
    """SIGINT during train(), or a signal whose handler raises: the step
    ends, a checkpoint is saved, and the handler's exception reaches the
    caller."""
    script = tmp_path / "long.py"
    script.write_text(
        "import signal\n"
        "import remat\n"
        "from remat.train import Dataset, Trainer, TrainingArguments\n"
        "def on_term(signum, frame):\n"
        "    raise TimeoutError('out of time')\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "data = Dataset(remat.randn([4096, 32], seed=0), remat.randint(4, [4096], seed=1))\n"
        "args = TrainingArguments('run', max_steps=10**6, per_device_train_batch_size=8, save_steps=10**6,\n"
        "                         logging_steps=50)\n"
        "trainer = Trainer(model=remat.nn.MLP([32, 64, 4]), args=args, train_dataset=data,\n"
        "                  on_log=lambda log: print('logged', flush=True))\n"
        "try:\n"
        "    trainer.train()\n"
        "except (KeyboardInterrupt, TimeoutError):\n"
        "    print('interrupted at step', trainer.state.global_step, flush=True)\n"
        "    raise\n")
    child = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "logged"
    child.send_signal(sent)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode != 0 and raised in stderr, stderr
    step = int(stdout.strip().splitlines()[-1].split()[-1])
    assert step >= 50
    assert (tmp_path / "run" / f"checkpoint-{step}" / "checkpoint.safetensors").exists()


def test_two_trainers_on_one_folder_take_turns_and_predict_gives_none_for_a_language_model(tmp_path):
    ids = np.random.default_rng(4).integers(0, 50, size=(16, 9), dtype=np.int64)
    data = Dataset(np.ascontiguousarray(ids[:, :8]), np.ascontiguousarray(ids[:, 1:]))
    args = TrainingArguments(tmp_path, max_steps=1, per_device_train_batch_size=8, save_strategy="no",
                             logging_steps=100)
    config = dict(vocab_size=50, block_size=8, n_layer=1, n_head=2, n_embd=16)
    first = Trainer(model=remat.nn.GPT(**config), args=args, train_dataset=data)
    first.train()
    second = Trainer(model=remat.nn.GPT(**config), args=args, train_dataset=data)  # `first` is still alive
    assert second.train().global_step == 1
    out = second.predict(data)
    assert out.predictions is None and out.label_ids is None and math.isfinite(out.metrics["test_loss"])


def test_auto_find_batch_size_trains_at_the_largest_batch_that_fits_the_memory_limit(tmp_path, capfd):
    ids = np.random.default_rng(4).integers(0, 50, size=(64, 33), dtype=np.int64)
    data = Dataset(np.ascontiguousarray(ids[:, :32]), np.ascontiguousarray(ids[:, 1:]))
    config = dict(vocab_size=50, block_size=32, n_layer=2, n_head=2, n_embd=32)
    args = TrainingArguments(tmp_path, max_steps=1, per_device_train_batch_size=64, save_strategy="no",
                             logging_steps=100, auto_find_batch_size=True, memory_limit="256KiB")
    assert args.memory_limit == 256 << 10
    with pytest.raises(remat.Error, match="no batch from per_device_train_batch_size 64 down to 1 fits"):
        Trainer(model=remat.nn.GPT(**config), args=args, train_dataset=data).train()
    args.memory_limit = "64MiB"  # room for the whole batch
    Trainer(model=remat.nn.GPT(**config), args=args, train_dataset=data).train()
    assert "auto_find_batch_size: per_device_train_batch_size 64 (of 64)" in capfd.readouterr().out
    with pytest.raises(remat.Error, match="auto_find_batch_size: needs memory_limit"):
        TrainingArguments(auto_find_batch_size=True)


def test_what_on_log_raises_stops_training_after_a_saved_step(tmp_path):
    def on_log(log):
        raise ValueError("a bug in the hook")
    args = TrainingArguments(tmp_path, max_steps=10, per_device_train_batch_size=4, logging_steps=3,
                             save_steps=100)
    trainer = Trainer(model=remat.nn.MLP([8, 16, 3]), args=args, train_dataset=gradient_data(), on_log=on_log)
    with pytest.raises(ValueError, match="a bug in the hook"):
        trainer.train()
    assert trainer.state.global_step == 3
    assert (tmp_path / "checkpoint-3" / "checkpoint.safetensors").exists()
    with pytest.raises(ValueError, match="a bug in the hook"):
        trainer.evaluate(gradient_data())


def test_what_on_log_raises_for_an_evaluation_stops_at_its_step(tmp_path):
    """The evaluation at step 2 is logged and refused: training stops at step
    2, saved, and the hook's exception is raised, though on_log called
    evaluate() itself in between."""
    def on_log(log):
        if "eval_loss" in log:
            trainer.evaluate(gradient_data(), metric_key_prefix="nested")
            raise ValueError("refused")
    args = TrainingArguments(tmp_path, max_steps=10, per_device_train_batch_size=4, logging_steps=100,
                             eval_strategy="steps", eval_steps=2, save_steps=100)
    trainer = Trainer(model=remat.nn.MLP([8, 16, 3]), args=args, train_dataset=gradient_data(),
                      eval_dataset=gradient_data(), on_log=on_log)
    with pytest.raises(ValueError, match="refused"):
        trainer.train()
    assert trainer.state.global_step == 2
    assert (tmp_path / "checkpoint-2" / "checkpoint.safetensors").exists()


# --- Accelerator and LocalSGD ------------------------------------------------

def gradient_data():
    return Dataset(remat.randn([32, 8], seed=5), remat.randint(3, [32], seed=6))


def test_accumulation_of_two_windows_equals_one_batch_of_twice_the_rows():
    data = gradient_data()
    small = remat.nn.MLP([8, 16, 3], seed=2)
    big = remat.nn.MLP([8, 16, 3], seed=2)
    accelerator = Accelerator(gradient_accumulation_steps=2)
    opt_small = remat.optim.SGD(small.parameters(), lr=0.1)
    small, opt_small, loader = accelerator.prepare(small, opt_small, DataLoader(data, batch_size=8))
    syncs = []
    for inputs, targets in loader:
        with accelerator.accumulate(small):
            accelerator.backward(remat.cross_entropy(small(inputs), targets))
            syncs.append(accelerator.sync_gradients)
            opt_small.step()
            opt_small.zero_grad()
    assert syncs == [False, True, False, True]
    opt_big = remat.optim.SGD(big.parameters(), lr=0.1)
    for inputs, targets in DataLoader(data, batch_size=16):
        remat.cross_entropy(big(inputs), targets).backward()
        opt_big.step()
        opt_big.zero_grad()
    for (name, a), (_, b) in zip(small.named_parameters(), big.named_parameters()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_prepare_refuses_what_it_cannot_prepare():
    with pytest.raises(remat.Error, match="cannot prepare a list"):
        Accelerator().prepare([1, 2])
    with pytest.raises(remat.Error, match="gradient_accumulation_steps"):
        Accelerator(gradient_accumulation_steps=0)


def test_local_sgd_counts_optimizer_steps_and_a_raising_block_skips_the_last_average():
    data = gradient_data()
    model = remat.nn.MLP([8, 16, 3], seed=2)
    accelerator = Accelerator(gradient_accumulation_steps=2)
    optimizer = remat.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = accelerator.prepare(model, optimizer, DataLoader(data, batch_size=4))
    with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=2, enabled=True) as local_sgd:
        for inputs, targets in loader:
            with accelerator.accumulate(model):
                accelerator.backward(remat.cross_entropy(model(inputs), targets))
                optimizer.step()
                optimizer.zero_grad()
                local_sgd.step()
    assert local_sgd.num_steps == 4  # 8 micro-batches, windows of 2
    assert local_sgd.syncs == 0 and accelerator.allreduce_calls == 0  # one process: nothing to average
    with pytest.raises(ZeroDivisionError):
        with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=2) as local_sgd:
            local_sgd.step()
            1 / 0
    with pytest.raises(remat.Error, match="local_sgd_steps"):
        with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=0):
            pass


def test_schedules_follow_transformers_factors():
    model = remat.nn.Linear(2, 2)
    optimizer = remat.optim.AdamW(model.parameters(), lr=1.0)
    scheduler = remat.optim.get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=10)
    lrs = []
    for _ in range(11):
        lrs.append(scheduler.get_last_lr()[0])
        scheduler.step()
    expected = [s / 2 if s < 2 else 0.5 * (1 + math.cos(math.pi * (s - 2) / 8)) for s in range(11)]
    assert lrs == pytest.approx(expected)
    assert optimizer.lr == pytest.approx(0.0)
    linear = remat.optim.get_linear_schedule_with_warmup(remat.optim.SGD(model.parameters(), lr=2.0), 0, 4)
    linear.step()
    assert linear.get_last_lr() == pytest.approx([1.5])
    floor = remat.optim.get_cosine_with_min_lr_schedule_with_warmup(remat.optim.SGD(model.parameters(), lr=2.0), 0,
                                                                    4, min_lr=0.5)
    for _ in range(4):
        floor.step()
    assert floor.get_last_lr() == pytest.approx([0.5])
    with pytest.raises(remat.Error, match="min_lr 5"):
        remat.optim.get_cosine_with_min_lr_schedule_with_warmup(optimizer, 0, 4, min_lr=5)
    with pytest.raises(remat.Error, match="num_cycles 1"):
        remat.optim.get_cosine_schedule_with_warmup(optimizer, 0, 4, num_cycles=1)
    with pytest.raises(remat.Error, match="kind 'exponential'"):
        remat.optim.LRScheduler(optimizer, "exponential")


# --- the course's three programs ---------------------------------------------

@needs_fashion
def test_course_trainer_program(tmp_path):
    run = run_example("trainer.py", "--max_steps", "30", "--eval_strategy", "steps", "--eval_steps", "30",
                      "--per_device_eval_batch_size", "500", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    evals = [line for line in run.stdout.splitlines() if "'eval_accuracy'" in line]
    assert evals, run.stdout
    accuracy = float(evals[-1].split("'eval_accuracy': ")[1].split(",")[0])
    assert accuracy > 0.6, evals[-1]
    assert (tmp_path / "results" / "checkpoint-30" / "checkpoint.safetensors").exists()


def test_course_accelerator_program(tmp_path):
    run = run_example("accelerator.py", "6", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 6
    assert ["sync True" in line for line in lines] == [False, True] * 3


@needs_fashion
def test_course_local_sgd_program(tmp_path):
    run = run_example("local_sgd.py", "24", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "1 rank(s), 24 batches each" in run.stdout and "0 allreduce calls" in run.stdout


@needs_fashion
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_course_local_sgd_program_on_two_ranks(tmp_path):
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMP_NUM_THREADS": "1"}
    run = run_example("local_sgd.py", "24", cwd=tmp_path, env_extra=env,
                      launcher=("mpirun", "-np", "2", "--oversubscribe", "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS"))
    assert run.returncode == 0, run.stdout + run.stderr
    # 24 optimizer steps, averaged every 8: three averages, each one allreduce (the model fits one bucket)
    assert "2 rank(s), 24 batches each" in run.stdout and "3 averages" in run.stdout, run.stdout


RAISING_BLOCK = """
import remat
from remat.train import Accelerator, DataLoader, Dataset, LocalSGD
accelerator = Accelerator()
model = remat.nn.MLP([8, 16, 3], seed=2)
optimizer = remat.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
data = Dataset(remat.randn([32, 8], seed=5), remat.randint(3, [32], seed=6))
try:
    with LocalSGD(accelerator=accelerator, model=model, local_sgd_steps=4) as local_sgd:
        for inputs, targets in DataLoader(data, batch_size=4):
            with accelerator.accumulate(model):
                accelerator.backward(remat.cross_entropy(model(inputs), targets))
                optimizer.step()
                optimizer.zero_grad()
                local_sgd.step()
            if local_sgd.num_steps == 5:
                before = accelerator.allreduce_calls
                raise RuntimeError("stop")
except RuntimeError:
    pass
with open(f"rank{accelerator.process_index}.txt", "w") as out:  # one file each: printed lines may interleave
    out.write(f"{local_sgd.syncs} {before} {accelerator.allreduce_calls}")
"""


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_a_raising_local_sgd_block_leaves_without_the_last_average_on_two_ranks(tmp_path):
    """Both ranks raise after 5 steps (one average at 4): leaving the block
    adds no allreduce (Accelerate's would average once more)."""
    (tmp_path / "raising.py").write_text(RAISING_BLOCK)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    run = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS",
                          sys.executable, str(tmp_path / "raising.py")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    for rank in range(2):
        syncs, before, after = map(int, (tmp_path / f"rank{rank}.txt").read_text().split())
        assert syncs == 1 and after == before, (rank, syncs, before, after)
