"""The cojob workload kind (Grouper): spec, driver (coordinator + scheduler loop), run."""
