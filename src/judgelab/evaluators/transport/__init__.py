"""How LLM judges reach their models: `provider` (the ``judgelab`` litellm provider: endpoint,
judge cache, HTTP, typed errors, call records), `schema` (each request fitted to what its
endpoint can take) and `loop` (the private event loop the judges' async calls run on)."""
