"""The run line each course program (examples/*.py) gives in its docstring
works as written from the source root after the README's commands: the
interpreter it names exists and has what the module needs, and the program
runs to its end (issue 31: it said `python3`, which may lack NumPy)."""
import glob
import os
import re
import shlex
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_PYTHON = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]  # ctest sets it to this build's python/


def run_lines():
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.py"))):
        with open(path) as f:
            match = re.search(r"^\s*(PYTHONPATH=build/python \S+ examples/\S+\.py.*)$", f.read(), re.M)
        yield os.path.basename(path), match.group(1) if match else None


@pytest.mark.parametrize("name,line", list(run_lines()))
def test_the_docstring_run_line_works(name, line, tmp_path):
    assert line is not None, f"examples/{name} gives no run line 'PYTHONPATH=build/python PYTHON examples/{name}'"
    line = line.split("  (")[0]  # a note after the command
    words = shlex.split(line)
    interpreter = words[1]
    assert os.access(os.path.join(ROOT, interpreter), os.X_OK), f"{interpreter} (from examples/{name}) is not there"
    assert words[0] == "PYTHONPATH=build/python", line
    # A folder that looks like the source root (what the programs write,
    # ./results, lands there): its build/ is this build's folder.
    build = os.path.dirname(os.path.realpath(BUILD_PYTHON)) if BUILD_PYTHON else os.path.join(ROOT, "build")
    for name_in_root, target in (("build", build), ("build-py", os.path.join(ROOT, "build-py")),
                                 ("examples", os.path.join(ROOT, "examples"))):
        os.symlink(target, tmp_path / name_in_root)
    env = dict(os.environ, PYTHONPATH="build/python")
    args = [a for a in words[2:] if a != "[DIR]"]
    run = subprocess.run([interpreter, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{line}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
