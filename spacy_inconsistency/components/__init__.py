"""Pipeline components: thin layers that read the Doc, call a backend and write the Doc."""
