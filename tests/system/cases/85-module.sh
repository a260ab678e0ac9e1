# SPDX-License-Identifier: MIT
# A job module from `make install` alone (module_case in lib.sh): the
# installed example count built with pkg-config and make, tested with the
# installed voltd-modtest, installed into the module directory, loaded from
# voltd.conf and served by the restarted service; a broken module refused
# at restart with the file and the reason in the journal.
# timeout: 120
module_case "$(ct pkg-config --variable=prefix voltd)/share/doc/voltd/examples/modules"
