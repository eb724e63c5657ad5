"""DSPy on LiteLLM, instrumented by openinference-instrumentation-dspy and openinference-instrumentation-litellm.

The model asks for the three tools through DSPy's native function calling (a ``dspy.ToolCalls`` output); the app
runs the three ``dspy.Tool``s side by side, as a DSPy program does with the calls a predictor returns. DSPy's
adapters parse a model's text answer only when it carries their field markers (``[[ ## answer ## ]]``),
which the fake server's text does not, so the second call and the streamed call go to ``dspy.LM``
directly, as DSPy programs also do (the stream through ``dspy.streamify``).
"""

from __future__ import annotations

import asyncio
import json
import os

import common
import dspy


def instrument() -> None:
    if common.zero_code():
        return  # opentelemetry-instrument loaded the instrumentors
    from openinference.instrumentation.dspy import DSPyInstrumentor
    from openinference.instrumentation.litellm import LiteLLMInstrumentor

    DSPyInstrumentor().instrument()
    LiteLLMInstrumentor().instrument()


async def slow_search(query: str) -> str:
    """Search the slow source."""
    return await common.slow_search_body(query)


async def medium_search(query: str) -> str:
    """Search the medium source."""
    return await common.medium_search_body(query)


async def fast_search(query: str) -> str:
    """Search the fast source."""
    return await common.fast_search_body(query)


def model() -> dspy.LM:
    # LiteLLM names the provider in the model (openai/...); DSPy's cache would answer a rerun without a call
    return dspy.LM(
        f"openai/{common.MODEL}",
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        cache=False,
    )


class PlanSearches(dspy.Signature):
    question: str = dspy.InputField()
    tools: list[dspy.Tool] = dspy.InputField()
    tool_calls: dspy.ToolCalls = dspy.OutputField()


PlanSearches.__doc__ = common.SYSTEM_PROMPT


async def agent_run() -> None:
    lm = model()
    tools = {tool.name: tool for tool in (dspy.Tool(slow_search), dspy.Tool(medium_search), dspy.Tool(fast_search))}
    plan = dspy.Predict(PlanSearches)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_native_function_calling=True)):
        planned = await plan.acall(question=common.AGENT_QUESTION, tools=list(tools.values()))
    calls = planned.tool_calls.tool_calls
    results = await asyncio.gather(*(tools[call.name].acall(**call.args) for call in calls))
    messages: list[dict[str, object]] = [
        {"role": "system", "content": common.SYSTEM_PROMPT},
        {"role": "user", "content": common.AGENT_QUESTION},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": json.dumps(call.args)}}
                for call in calls
            ],
        },
        *(
            {"role": "tool", "tool_call_id": call.id, "content": str(result)}
            for call, result in zip(calls, results, strict=True)
        ),
    ]
    await lm.acall(messages=messages)


class Summarise(dspy.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lm = model()

    async def aforward(self, question: str) -> dspy.Prediction:
        answers = await self.lm.acall(messages=[{"role": "user", "content": question}])
        return dspy.Prediction(answer=answers[0])


async def stream_call() -> None:
    # track_usage: DSPy asks for a streamed call's usage only when it tracks usage
    with dspy.context(track_usage=True):
        async for _chunk in dspy.streamify(Summarise(), is_async_program=True)(question=common.STREAM_QUESTION):
            pass


if __name__ == "__main__":
    common.run("dspy", instrument, agent_run, stream_call)
