#!/bin/sh
# The Python 3.12 wheels that run_gpu_notebook.py needs on the GPU machine
# beyond what its image holds (torch, numpy, psutil, packaging, pygments,
# python-dateutil, typing-extensions, attrs, ... are there; nothing can be
# fetched there). Run here, at the repository's root; the wheels go to .whl/
# (ignored through .git/info/exclude) and travel with `carry: [".whl", "bin"]`.
set -e
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
PY=${PYTHON:-python3}
$PY -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 \
  --platform manylinux1_x86_64 -d .whl \
  nbclient==0.11.0 nbformat==5.11.1 ipykernel==7.4.0 ipython==9.18.1 traitlets==5.16.1 \
  anywidget==0.11.0 ipywidgets==8.1.9 widgetsnbextension==4.0.16 jupyterlab_widgets==3.0.17 psygnal==0.16.1 \
  jupyter_client==8.10.0 jupyter_core==5.9.1 platformdirs==4.14.8 pyzmq==27.3.0 tornado==6.6.1 \
  comm==0.2.3 debugpy==1.8.22 matplotlib_inline==0.2.2 nest_asyncio2==1.7.4 \
  ipython_pygments_lexers==1.1.1 jedi==0.20.1 parso==0.8.7 pexpect==4.9.0 ptyprocess==0.7.0 \
  prompt_toolkit==3.0.53 wcwidth==0.9.4 stack_data==0.6.3 executing==2.3.0 asttokens==3.0.2 pure_eval==0.2.4 \
  fastjsonschema==2.22.3 jsonschema==4.26.0 jsonschema_specifications==2025.9.1 \
  referencing==0.37.0 rpds_py==2026.9.1
