#!/bin/sh
# Installs what bench/search/run.py, spaces.py and field.py need beyond the build: Optuna
# (3.1 on bookworm) and cmaes (its CmaEsSampler's dependency), from Debian, for
# /usr/bin/python3. Run as root.
set -eu
apt-get install -y python3-optuna python3-cmaes
/usr/bin/python3 -c 'import optuna, cmaes; print("optuna", optuna.__version__, "cmaes", cmaes.__version__)'
