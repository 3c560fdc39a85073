"""The shipped nginx site in front of real replicas."""
