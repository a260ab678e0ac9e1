# SPDX-License-Identifier: MIT
# src/chan: sources, tests and benchmarks of this layer (included by Makefile.am).
