"""CLI smoke tests through a real subprocess."""

import subprocess
import sys


def run(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "mining", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_unknown_command_prints_usage_and_fails():
    p = run("frobnicate")
    assert p.returncode == 2
    assert "unknown command 'frobnicate'" in p.stderr
    assert "usage: python -m mining" in p.stderr


def test_bad_override_is_one_clear_sentence():
    p = run("tasks", "task.no_such_key=1")
    assert p.returncode == 2
    assert "bad override" in p.stderr and "task.no_such_key" in p.stderr
    assert "Traceback" not in p.stderr


def test_tasks_lists_embedded_suite_with_append_syntax():
    p = run("tasks", "+task=level3")
    assert p.returncode == 0, p.stderr
    assert "l3_01_mlp" in p.stdout


def test_kernelbench_without_root_says_what_to_do():
    p = run("tasks", "task=kernelbench")
    assert p.returncode == 2
    assert "task.root" in p.stderr
