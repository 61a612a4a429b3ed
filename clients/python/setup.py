"""setup.py - bundles the C client's shared library (liblanes_client.so) into the package, so that
`pip install clients/python` gives a package that needs nothing from the source tree afterwards.

The library comes from, in order: LANESCHED_CLIENT_LIB; the source tree's build/lib (scripts/demo.sh
and scripts/test.sh build it); else it is built here with cmake, target lanes_client_shared, in
the source tree's build/ (the Debian packages of scripts/install-deps.sh --build are needed).
Everything else is in pyproject.toml.
"""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LIB = "liblanes_client.so"


def library() -> Path:
    env = os.environ.get("LANESCHED_CLIENT_LIB")
    if env:
        return Path(env).resolve()
    built = ROOT / "build" / "lib" / LIB
    if not built.exists():
        if not (ROOT / "CMakeLists.txt").exists():
            raise SystemExit(f"{LIB} not found: set LANESCHED_CLIENT_LIB to a built one")
        build = ROOT / "build"
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "lanes_client_shared", "-j", str(os.cpu_count() or 2)])
    return built.resolve()


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        dest = Path(self.build_lib) / "lanesched" / "_lib"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(library(), dest / LIB)


setup(cmdclass={"build_py": BuildWithLibrary})
