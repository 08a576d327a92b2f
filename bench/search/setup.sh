#!/bin/sh
# Installs what bench/search/run.py needs beyond the build: Optuna, from Debian (3.1 on
# bookworm), for /usr/bin/python3. Run as root.
set -eu
apt-get install -y python3-optuna
/usr/bin/python3 -c 'import optuna; print("optuna", optuna.__version__)'
