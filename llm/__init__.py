"""LLM access for every role through the `openai` client (any OpenAI-compatible endpoint), with offline
engines, request accounting and replay."""
