"""The fake LLM server's ``POST /v1/embeddings`` endpoint.

Accepts what OpenAI accepts (a string, strings, or token arrays; ``dimensions``; ``encoding_format`` float or
base64), waits the embedding model's latency, and returns unit vectors that depend only on the seed, the
model and the text, so equal texts get equal embeddings in every run.
"""

from __future__ import annotations

import base64
import math
import random
import struct
import time
from typing import Any

from .http_transport import _HTTPHandlerBase
from .model_catalog import _EMBEDDING_MODELS, _base_model
from .prompt_tokens import _stable_int, _text_tokens
from .request_errors import _RequestError


class _EmbeddingsEndpoint(_HTTPHandlerBase):
    """The ``POST /v1/embeddings`` endpoint."""

    def _embeddings(self, entry: dict[str, Any]) -> None:
        fake = self.server.fake
        body = self._json_body()
        model, raw_input = body.get("model"), body.get("input")
        fake._update(entry, model=model if isinstance(model, str) else None)
        if not isinstance(model, str) or not model:
            raise _RequestError(400, "you must provide a model parameter", "missing_required_parameter", "model")
        inputs = self._embedding_inputs(raw_input)
        dimensions = body.get("dimensions", fake.embedding_dimensions)
        if not isinstance(dimensions, int) or isinstance(dimensions, bool) or not 1 <= dimensions <= 8192:
            raise _RequestError(400, "Invalid 'dimensions': expected an integer from 1 to 8192.", "invalid_value")
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise _RequestError(400, "Invalid 'encoding_format': use 'float' or 'base64'.", "invalid_value")
        tokens = sum(max(1, _text_tokens(text)) for text in inputs)
        fixed, per_token = _EMBEDDING_MODELS.get(_base_model(model), _EMBEDDING_MODELS["text-embedding-3-small"])
        fake._update(entry, prompt_tokens=tokens, inputs=len(inputs))
        fake._sleep_until(entry["started"] + (fixed + per_token * tokens) * fake.time_scale)
        data = []
        for index, text in enumerate(inputs):
            vector = _embedding(fake.seed, model, text, dimensions)
            embedding: Any = vector
            if encoding == "base64":
                embedding = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        payload = {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        fake._update(entry, status=200, finished=time.monotonic())
        self._send_json(200, payload)

    @staticmethod
    def _embedding_inputs(raw: Any) -> list[str]:
        if isinstance(raw, str):
            return [raw]
        if isinstance(raw, list) and raw:
            # Token arrays are accepted like OpenAI does; their text is just the numbers.
            if all(isinstance(x, int) for x in raw):
                return [" ".join(map(str, raw))]
            if all(isinstance(x, str) for x in raw):
                return list(raw)
            if all(isinstance(x, list) and all(isinstance(t, int) for t in x) for x in raw):
                return [" ".join(map(str, x)) for x in raw]
        raise _RequestError(
            400, "'input' must be a string, an array of strings, or token arrays.", "invalid_value", "input"
        )


def _embedding(seed: int, model: str, text: str, dimensions: int) -> list[float]:
    """A unit vector that depends only on (seed, model, text)."""
    rng = random.Random(_stable_int("embedding", seed, _base_model(model), text))
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]
