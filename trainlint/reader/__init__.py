"""The project reader: reading files, finding configuration files and a project's files, and
resolving imports to project files. Below the model, which receives trees from it and answers
questions about them; it knows nothing of rules, settings or summaries."""
