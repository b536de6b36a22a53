#!/usr/bin/env bash
# Runs glossary_test.py on the docs directory (the one holding checked_commands.txt).
set -euo pipefail
exec /usr/bin/python3 "$1" "$(dirname "$(readlink -f "$2")")"
