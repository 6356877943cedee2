#!/bin/sh
# LSF resource connector / Host Factory action requestMachines, answered by the simulated provider
# from $PRO_CONF_DIR/conf/sim_config.json with its state in $PRO_DATA_DIR.
here=$(dirname "$0")
exec "$here/../scripts/sim-provider" lsf requestMachines "$@"
