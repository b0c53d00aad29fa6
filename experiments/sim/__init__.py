"""Fast flow-level simulation building blocks (pure, no emulation)."""
