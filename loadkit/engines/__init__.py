"""Built-in engine adapters; each is registered through the public hooks in `builtin`."""
