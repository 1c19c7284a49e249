"""The fake Messages server, driven by the real anthropic SDK."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import anthropic
import pytest
from messages_server import MessagesServer, garbage, hang, ratelimit, status, text, tool


def ask(url: str, prompt: str | list = "same thing?", timeout: float = 5.0, **create_kw):
    """One messages.create call through a fresh client with retries off."""

    async def call():
        client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-test-key", max_retries=0, timeout=timeout)
        try:
            return await client.messages.create(
                model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": prompt}], **create_kw
            )
        finally:
            await client.close()

    return asyncio.run(call())


@pytest.fixture
def server():
    """A started server, closed after the test."""
    with MessagesServer() as s:
        yield s


def test_text_reply_content_usage_and_request_record(server):
    server.script([text('{"same": true}', input_tokens=321, output_tokens=7)])
    msg = ask(
        server.url, prompt=[{"type": "text", "text": "note A"}, {"type": "text", "text": " vs note B"}], system="judge"
    )
    assert msg.content[0].text == '{"same": true}'
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (321, 7)
    assert msg.model == "claude-sonnet-4-6"  # echoed from the request
    assert msg._request_id == "req_0"
    [req] = server.requests
    assert (req.prompt, req.system) == ("note A vs note B", "judge")
    assert req.body["max_tokens"] == 64
    assert req.headers["content-type"] == "application/json"


def test_default_responder_and_missing_usage(server):
    assert ask(server.url).content[0].text == '{"same": false, "mechanism": ""}'
    server.script([text("no usage here", usage=False)])
    msg = ask(server.url)
    # The SDK builds responses without validation, so an absent usage block reads back as None.
    assert msg.content[0].text == "no usage here"
    assert msg.usage is None


def test_429_exposes_retry_after(server):
    server.script([status(429, retry_after=7)])
    with pytest.raises(anthropic.RateLimitError) as info:
        ask(server.url)
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.body["error"]["type"] == "rate_limit_error"


@pytest.mark.parametrize(
    "code, expected, not_expected",
    [(529, anthropic.OverloadedError, None), (500, anthropic.InternalServerError, anthropic.OverloadedError)],
)
def test_server_errors_map_to_sdk_classes(server, code, expected, not_expected):
    server.script([status(code)])
    with pytest.raises(expected) as info:
        ask(server.url)
    assert info.value.status_code == code
    if not_expected is not None:
        assert not isinstance(info.value, not_expected)


def test_hang_times_out_and_close_is_prompt():
    baseline = threading.active_count()
    server = MessagesServer().start()
    try:
        server.script([hang(5)])
        started = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            ask(server.url, timeout=0.5)
        assert time.monotonic() - started < 2
    finally:
        started = time.monotonic()
        server.close()
    # The handler is still inside hang(5); close() must wake it, not wait it out.
    assert time.monotonic() - started < 0.5
    deadline = time.monotonic() + 1
    while threading.active_count() > baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == baseline, "the hanging handler thread was not woken"


def test_garbage_body_fails_fast(server):
    server.script([garbage("not json")])
    started = time.monotonic()
    # The SDK lets the JSON decoder's ValueError escape rather than wrapping it in an APIError.
    with pytest.raises(ValueError):
        ask(server.url, timeout=3)
    assert time.monotonic() - started < 1


def test_calls_count_and_script_falls_back_to_responder(server):
    server.responder = lambda req, n: text(f"reply {n}")
    server.script([status(500)])
    with pytest.raises(anthropic.InternalServerError):
        ask(server.url)
    assert [ask(server.url).content[0].text for _ in range(2)] == ["reply 1", "reply 2"]
    assert server.calls == 3
    assert [r.n for r in server.requests] == [0, 1, 2]


def test_cli_serves_with_latency():
    script = Path(__file__).with_name("messages_server.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), "--latency", "0.3", "--reply", '{"same": true}'],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        started = time.monotonic()
        assert ask(url).content[0].text == '{"same": true}'
        assert time.monotonic() - started >= 0.3
    finally:
        proc.terminate()
        proc.wait(timeout=5)


# -- what issue 14 added: oversized bodies, rate-limit headers, tool use, Message Batches -----------------


def test_an_oversized_body_is_a_400_prompt_too_long(server):
    server.max_body = 500
    ask(server.url, prompt="short")
    with pytest.raises(anthropic.BadRequestError) as e:
        ask(server.url, prompt="x" * 1000)
    assert e.value.status_code == 400 and "prompt is too long" in str(e.value)
    assert e.value.body["error"]["type"] == "invalid_request_error"
    assert server.calls == 2  # recorded all the same


def test_retry_after_and_ratelimit_headers_reach_the_sdk(server):
    server.script([status(429, retry_after=1, headers=ratelimit("tokens", 0, 2.0))])
    with pytest.raises(anthropic.RateLimitError) as e:
        ask(server.url)
    headers = e.value.response.headers
    assert headers["retry-after"] == "1" and headers["anthropic-ratelimit-tokens-remaining"] == "0"
    assert headers["anthropic-ratelimit-tokens-reset"].endswith("Z")


def test_tool_use_reply_answers_the_forced_tool(server):
    server.script([tool({"same": True, "mechanism": "m"})])
    msg = ask(
        server.url,
        tools=[{"name": "alias_reply", "input_schema": {"type": "object"}}],
        tool_choice={"type": "tool", "name": "alias_reply"},
    )
    [block] = msg.content
    assert (block.type, block.name, block.input) == ("tool_use", "alias_reply", {"same": True, "mechanism": "m"})
    assert msg.stop_reason == "tool_use"


def test_message_batches_create_retrieve_and_results_through_the_sdk(server):
    server.responder = lambda req, n: text(f"answer to {req.prompt}", input_tokens=10, output_tokens=2)
    server.batch_outcome = lambda n, params: {1: "expired", 2: "errored"}.get(n)
    server.max_body = 2000

    async def run():
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-test-key", max_retries=0)
        requests = [
            {
                "custom_id": f"q{i}",
                "params": {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": p}]},
            }
            for i, p in enumerate(["a", "b", "c", "x" * 3000])
        ]
        batch = await client.messages.batches.create(requests=requests)
        running = await client.messages.batches.retrieve(batch.id)
        server.end_batches()
        ended = await client.messages.batches.retrieve(batch.id)
        results = {r.custom_id: r.result async for r in await client.messages.batches.results(batch.id)}
        await client.close()
        return batch, running, ended, results

    batch, running, ended, results = asyncio.run(run())
    assert batch.processing_status == running.processing_status == "in_progress" and running.results_url is None
    assert ended.processing_status == "ended" and ended.results_url.endswith(f"/{batch.id}/results")
    assert ended.request_counts.succeeded == 1 and ended.request_counts.errored == 2
    assert ended.request_counts.expired == 1
    assert results["q0"].type == "succeeded" and results["q0"].message.content[0].text == "answer to a"
    assert results["q0"].message.usage.input_tokens == 10
    assert results["q1"].type == "expired" and results["q2"].type == "errored"
    assert results["q3"].type == "errored" and results["q3"].error.error.type == "invalid_request_error"
    assert server.batch_calls[:2] == ["create", f"retrieve {batch.id}"]
