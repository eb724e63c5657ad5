"""The ways a request to the fake LLM server ends without its answer.

``_RequestError`` is a request the server answers with an OpenAI-shaped error (``_error_body`` gives the
``{"error": {"message", "type", "param", "code"}}`` body); ``_ClientGone`` and ``_Stopping`` end a request
whose client hung up or whose server is shutting down, which the request log records as aborted.
"""

from __future__ import annotations

from typing import Any


class _Stopping(Exception):
    """The server is shutting down while a request was waiting."""


class _ClientGone(Exception):
    """The client closed the connection before the response was complete."""


class _RequestError(Exception):
    """A request the server answers with an OpenAI-shaped error."""

    def __init__(self, status: int, message: str, code: str | None, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.error_type = "invalid_request_error" if status < 500 else "server_error"


def _error_body(error: _RequestError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.error_type, "param": error.param, "code": error.code}}
