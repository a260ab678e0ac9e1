# SPDX-License-Identifier: MIT
# src/io: sources, tests and benchmarks of this layer (included by Makefile.am).
