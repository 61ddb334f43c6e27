"""bench/cpu_roles.py: whose CPU a throughput run spends, sampled from /proc (Linux)."""

import doctest
import subprocess
import sys
import time

import pytest

from bench import cpu_roles

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_doctests():
    assert doctest.testmod(cpu_roles).failed == 0


@linux
def test_a_real_compile_is_charged_to_gcc_and_a_python_child_elsewhere(tmp_path):
    src = tmp_path / "a.cpp"
    src.write_text("#include <regex>\n#include <map>\n#include <string>\n"
                   "std::map<std::string, int> f(const std::string& s) {\n"
                   "  std::map<std::string, int> m; std::regex r(\"[a-z]+\");\n"
                   "  for (auto it = std::sregex_iterator(s.begin(), s.end(), r); it != std::sregex_iterator(); ++it)\n"
                   "    m[it->str()]++;\n  return m;\n}\n")
    s = cpu_roles.RoleSampler(period=0.05)
    t0 = time.perf_counter()
    subprocess.run(["c++", "-O2", "-c", str(src), "-o", str(tmp_path / "a.o")], check=True)
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    subprocess.run([sys.executable, "-c", busy], check=True)
    time.sleep(0.2)
    s.stop()
    roles = s.within([(t0, time.perf_counter())])
    assert roles.get("gcc", 0) > 0.2, roles  # cc1plus ran for most of a second or more
    assert roles.get("other", 0) > 0.2, roles  # the busy python child: not a compiler, not a worker
    assert list(roles) == sorted(roles, key=lambda k: -roles[k])  # most first
