"""The Slurm bridge (``provisioner-slurm``): Slurm's power saving and dynamic nodes, driving the daemon."""
