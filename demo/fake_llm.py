"""A fake OpenAI-compatible HTTP server with realistic, deterministic timing.

The demo agent and the end-to-end tests point the real ``openai`` client (and with it the real
``opentelemetry-instrumentation-openai``) at this server, because no real LLM service is reachable.
It answers over plain HTTP/1.1 from a ``ThreadingHTTPServer`` on 127.0.0.1, so concurrent calls
(``asyncio.gather``) really overlap, and it uses only the standard library.

Endpoints: ``POST /v1/chat/completions`` (plain and ``stream=True`` server-sent events, tool calls,
``stream_options.include_usage``), ``POST /v1/embeddings``, ``GET /v1/models`` (and ``/v1/models/{id}``),
``GET /health``; with ``vllm_like`` also ``GET /metrics`` (see ``demo.vllm_like``). Errors use OpenAI's shape
``{"error": {"message", "type", "param", "code"}}``.

How the "model" behaves (deterministic for a given request and ``seed``):

* Tool calls or text: with ``tools`` in the request, the model calls tools while it still has a tool round
  to play after the last user message, otherwise it answers with text. With at most one ``[[call: ...]]``
  directive that is simply: no tool result (role ``tool``) after the last user message -> tool calls, else text.
* ``[[call: name1, name2]]`` in the last user message calls exactly those tools, in parallel (one response,
  several ``tool_calls``; a name may repeat). Several such directives are successive rounds: the k-th one is
  used after k-1 rounds of tool results, so ``[[call: search]] [[call: fetch, fetch]]`` scripts a two-step agent.
  Without a directive the first tool is called once. ``tool_choice="none"`` forces text, ``"required"`` a tool
  call every turn (the first tool once the directives are used up), ``{"type": "function", "function":
  {"name": ...}}`` that tool every turn; ``parallel_tool_calls=False`` keeps only the first call of a round.
  Arguments are generated from each tool's JSON-schema ``parameters``.
* ``[[answer_tokens: N]]`` sets the length of the text answer (default 40 tokens; ``max_tokens`` or
  ``max_completion_tokens`` cut it, with ``finish_reason="length"``). Text is plausible English-ish sentences;
  an answer that follows tool results starts with "I checked <tool names>."

Timing, per model (``ModelTiming``; every delay is multiplied by ``time_scale``):
the first token comes after ``ttft + uncached_prompt_tokens * prefill_per_token`` (plus, for reasoning
models, the hidden reasoning tokens at ``decode_per_token`` each), then one token per ``decode_per_token``;
the response ends one more decode step after the last token (the stop token). So a plain call takes
``ttft + n * decode`` and a stream delivers its first chunk after ``ttft`` and its last after the same total.

Tokens: prompt tokens are about a quarter of the characters of every message (plus 3 per message) and of
the ``tools`` JSON. Reasoning tokens exist only for ``o*`` models: about 30% of ``completion_tokens``.

Prefix cache, like OpenAI's: the server remembers every prompt prefix (tools, then whole messages) it has
prefilled for a model. ``cached_tokens`` is the token count of the longest remembered prefix, rounded down
to a multiple of 64, and 0 when that prefix is under 1024 tokens. A prefix is remembered once its prompt is
prefilled (at first token), so concurrent first calls all miss. To hit it in a demo, give every call the
same long system prompt (over ~4,200 characters, i.e. 1024+ tokens) and the same tools: the first call
reports 0 cached tokens, every later one with the same model reports the system prompt's tokens (rounded
down to 64) and gets a shorter time to first token.

Run it by hand with ``python -m demo.fake_llm --port 0``: it prints the base URL and
serves until interrupted; ``--vllm-like`` adds vLLM's queueing, server spans and ``/metrics``
(``demo.vllm_like``). The server never logs request bodies.

Where the parts live (this module re-exports the public names and runs the command line):

* ``demo.fake_openai_server``: ``FakeOpenAIServer``, its settings and lifecycle (start, stop, ``base_url``).
* ``demo.request_log``: the request log behind ``FakeOpenAIServer.requests``.
* ``demo.model_catalog``: ``ModelTiming``, ``DEFAULT_TIMINGS``, snapshot names and embedding models.
* ``demo.scripted_chat``: the "model", what a chat completion answers (directives, tool calls, text);
  ``demo.tool_arguments`` writes tool arguments from JSON schemas and ``demo.plausible_text`` the words.
* ``demo.prompt_tokens`` and ``demo.prefix_cache``: token counting, stable seeds and the prefix cache.
* ``demo.http_transport``: the threading HTTP server, request bodies, JSON responses and server-sent events;
  ``demo.request_errors``: the OpenAI-shaped errors and the other ways a request ends early.
* ``demo.http_handler``: routing and the small endpoints (``/v1/models``, ``/health``, ``/metrics``);
  ``demo.chat_requests`` validates chat completions, ``demo.chat_responses`` answers them (plain and
  streamed), ``demo.embeddings_endpoint`` serves embeddings.
"""

from __future__ import annotations

import argparse
import signal
import time

from .fake_openai_server import FakeOpenAIServer
from .model_catalog import DEFAULT_TIMINGS, ModelTiming

__all__ = ["DEFAULT_TIMINGS", "FakeOpenAIServer", "ModelTiming", "main"]


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted: ``python -m demo.fake_llm --port 0``."""
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible LLM server on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port to bind on 127.0.0.1 (0: any free port)")
    parser.add_argument("--time-scale", type=float, default=1.0, help="multiply every delay by this")
    parser.add_argument("--seed", type=int, default=0, help="seed for generated text and arguments")
    parser.add_argument(
        "--vllm-like",
        action="store_true",
        help="behave like vLLM: a bounded batch (requests queue), llm_request server spans, GET /metrics",
    )
    parser.add_argument("--max-running", type=int, default=2, help="with --vllm-like: requests run at once")
    parser.add_argument(
        "--otlp-traces-endpoint",
        metavar="URL",
        help="with --vllm-like: export the server spans over OTLP/gRPC to URL (as vLLM's flag of that name)",
    )
    args = parser.parse_args(argv)
    vllm_like = None
    if args.vllm_like:
        from .vllm_like import VllmLike

        vllm_like = VllmLike(max_running=args.max_running, otlp_endpoint=args.otlp_traces_endpoint)
    server = FakeOpenAIServer(port=args.port, time_scale=args.time_scale, seed=args.seed, vllm_like=vllm_like).start()
    # SIGTERM (what a test harness sends) should shut down as cleanly as Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if vllm_like is not None:
            vllm_like.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
