#!/bin/sh
# install.sh PYTHON3 PACKAGE_DIR - the documented install, checked: a fresh venv of Debian's
# python3 (with its site packages: setuptools and wheel come from Debian), then
#   pip install --no-index --no-build-isolation PACKAGE_DIR
# with nothing fetched, then the installed package's import, its bundled library and the
# lanesched-worker command, from outside the source tree. LANESCHED_CLIENT_LIB (CTest sets it)
# names the library to bundle; without it setup.py takes or builds the tree's build/lib one.
set -eu
py=$1
pkg=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv --system-site-packages "$tmp/venv"
# pip builds in a copy of the package's folder: the source tree must stay clean
cp -r "$pkg" "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src/"*.egg-info
PIP_NO_INDEX=1 "$tmp/venv/bin/pip" install --quiet --no-index --no-build-isolation "$tmp/src"
cd "$tmp"
"$tmp/venv/bin/python" - <<'PY'
import lanesched, os
path = lanesched.library_path()
assert "/site-packages/lanesched/_lib/" in path or os.environ.get("LANESCHED_CLIENT_LIB") == path, path
assert lanesched.shape_sign(["You are a helpful assistant."]) == 0x91F47F2F45B64EFD
print("installed:", lanesched.__file__, "library:", path)
PY
"$tmp/venv/bin/lanesched-worker" --help >/dev/null
unset LANESCHED_CLIENT_LIB
"$tmp/venv/bin/python" -c "import lanesched; p = lanesched.library_path(); assert '/site-packages/lanesched/_lib/' in p, p; print('bundled:', p)"
echo "python_install: ok"
