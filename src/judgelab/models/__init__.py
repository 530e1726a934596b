"""Where completions come from: embedded GGUF models and OpenAI-compatible endpoints."""
