# SPDX-License-Identifier: MIT
# src/rt: sources, tests and benchmarks of this layer (included by Makefile.am).
