"""The top floor of the dataset: the whole run composed from the stages, its renders (ToolMind, Nanbeige,
OpenAI), the dataset card, validation, publishing and the run summary."""
