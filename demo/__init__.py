"""The bundled demo, kept in the repository and out of the installed package: a research agent
(``agent``), a fake OpenAI-compatible LLM server (``fake_llm``, whose docstring names the modules it is
made of) that the demo and the e2e tests talk to, and ``python -m demo`` to run the agent profiled end to end."""
