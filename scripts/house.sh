#!/usr/bin/env bash
# The structure numbers of issue 26, for non-test code (tests/, */tests/*, tests.rs, *_tests.rs,
# #[cfg(test)] items and target/ left out), so that anyone can see them before committing:
#
#   bash scripts/house.sh               the report: a summary line, then the details
#   bash scripts/house.sh --quiet       the summary line only
#   bash scripts/house.sh --check       also exit 1 when a number is over the issue's bar (0 circles,
#                                       0 files over 600, at most 1 service function over 80,
#                                       0 copies, 500 entry lines, 600 README lines)
#   bash scripts/house.sh --max-circles 0 [--max-copies N ...]
#                                       exit 1 when one of the numbers given is over (with --check:
#                                       these replace the issue's bars; see --help)
#   bash scripts/house.sh --self-test   checks the counting on small synthetic fixtures
#
# The summary line:
#   house: circles=N files_over_600=N service_functions_over_80=N functions_over_80=N
#          copies_between_services=N service_entry_lines=N readme_lines=N
# circles: strongly connected modules of one crate (use declarations and crate::/super::/self::/
# child-module paths, re-exports followed to their origin; a `mod` line is no edge);
# files_over_600: non-test lines of files in crates/ and services/; *_functions_over_80: a fn from
# its signature line to its closing brace; copies_between_services: runs of 6 or more identical
# trimmed lines (blank, comment-only, punctuation-only and `use` lines skipped) in two different
# services/<name>/; service_entry_lines: services/*/src/lib.rs + main.rs; readme_lines: README.md.
# Reads the sources only (Python 3 standard library, no cargo, no network); about two seconds.
set -euo pipefail

exec python3 "$(dirname "${BASH_SOURCE[0]}")/house.py" "$@"
