# SPDX-License-Identifier: MIT
# src/http: sources, tests and benchmarks of this layer (included by Makefile.am).
