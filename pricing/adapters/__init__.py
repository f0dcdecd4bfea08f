"""Price adapters, one module per source. Importing this package registers them all."""
