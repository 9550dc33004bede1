"""What leaves the machine and what is remembered: the release bundle and the local spend
registry."""
