"""Loopback fixtures shared by tests/ and bench/, never a product path: a real OpenAI-compatible
server on 127.0.0.1 (`openai_server`), replies that are pure functions of the request
(`pure_endpoint`) and the environment of a judgelab subprocess on a scratch project
(`scratch`). Not part of the installed package."""
