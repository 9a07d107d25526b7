"""The batch endpoints of the loopback fake server (tests/support/fake_llm_server.py).

OpenAI Batch API:
  ``POST /v1/files`` (multipart upload, purpose "batch"), ``POST /v1/batches``,
  ``GET /v1/batches/ID``, ``GET /v1/files/ID/content``.
Together's batch API (the same JSONL lines and output, its own upload and job objects):
  ``POST /v1/files`` without a file part answers 302 to ``PUT /upload/ID``, then
  ``POST /v1/files/ID/preprocess``; ``POST /v1/batches`` returns ``{"job": ...}`` and
  ``GET /v1/batches/ID`` the job (status ``IN_PROGRESS``/``COMPLETED``).
Gemini batch mode (inline requests):
  ``POST /v1beta/models/MODEL:batchGenerateContent``, ``GET /v1beta/batches/ID``.
Anthropic Message Batches:
  ``POST /v1/messages/batches``, ``GET /v1/messages/batches/ID``,
  ``GET /v1/messages/batches/ID/results``.

A batch stays ``in_progress`` for ``FakeLLMServer.batch_delay`` seconds after it is
created; the first retrieve after that answers every item through the server's script and
responder (an item answered with a status >= 400 is an errored item) and completes it.
An item the chat server would refuse (``documented_refusal``, when ``enforce_rules``) is
refused in the batch with the same error body, as each API writes an errored item: OpenAI
(and Together) a line of the error file whose ``response`` has the status and that body
(``error`` stays null: it is for failures without an HTTP answer); Anthropic an ``errored``
result whose ``error`` is that body; Gemini the item's ``error`` with the status and message.
Refused items are in ``FakeLLMServer.refused`` as online ones are; an error the responder
answers with a JSON ``raw_body`` is written with that body the same way.
Results come back in a shuffled order (seeded by ``FakeLLMServer.batch_order_seed`` and the
batch's custom ids, never the submission order when there are two or more): OpenAI's batch guide
and Together's say "the output line order may not match the input line order", Anthropic's
results endpoint "Results are not guaranteed to be in the same order as requests"
(https://docs.anthropic.com/en/api/retrieving-message-batch-results). Google documents its
inlined responses "in the same order as the input requests", but they have been seen out of
order (github.com/googleapis/python-genai/issues/1909); the adapter keys them by metadata.
``FakeLLMServer.batches`` maps batch id -> {"api", "custom_ids", ...};
``batch_items`` counts every item ever submitted (a resumed run must not add to it).

Batches that do not complete, as the providers document them: deleting an id from
``FakeLLMServer.batches`` makes the provider forget it (every retrieve answers 404, as
after the provider's retention period). ``FakeLLMServer.batch_endings``, a list of
"expired", "cancelled" or "failed", ends the next batches to finish that way (one each, in
order) with no item answered: OpenAI ``status`` expired/cancelled with every request in the
error file under code ``batch_expired``/``batch_cancelled``, or failed with no file;
Together ``EXPIRED``/``CANCELLED``/``FAILED`` with no file; Anthropic ``ended`` with every
result ``expired`` or ``canceled`` (it has no failed batch); Gemini
``BATCH_STATE_EXPIRED``/``_CANCELLED``/``_FAILED`` with no response.
"""
from __future__ import annotations

import email.parser
import json
import random
import time
import uuid
from typing import Any


def _now() -> int:
    return int(time.time())


def route(handler: Any, method: str, path: str, raw: bytes) -> bool:
    """Answer a batch request; False when ``path`` is not a batch endpoint."""
    owner = handler.server.owner
    parts = path.strip("/").split("/")
    if method == "POST" and path == "/v1/files":
        content_type = handler.headers.get("Content-Type", "")
        message = email.parser.BytesParser().parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        data, purpose, filename = b"", "", "upload.jsonl"
        for part in (message.get_payload() if message.is_multipart() else []):
            name = part.get_param("name", header="content-disposition")
            if name == "file":
                data = part.get_payload(decode=True)
                filename = part.get_filename() or filename
            elif name == "purpose":
                purpose = part.get_payload(decode=True).decode()
        file_id = f"file-{uuid.uuid4().hex[:16]}"
        if not data:  # Together: the content comes by PUT to the URL given here
            with owner._lock:
                owner.files[file_id] = b""
                owner.together_files.add(file_id)
            base = f"http://127.0.0.1:{handler.server.server_address[1]}"
            handler._send_bytes(302, b"", "text/plain", {"Location": f"{base}/upload/{file_id}",
                                                         "X-Together-File-Id": file_id})
            return True
        with owner._lock:
            owner.files[file_id] = data
        handler._send_json(200, {"id": file_id, "object": "file", "bytes": len(data),
                                 "created_at": _now(), "filename": filename,
                                 "purpose": purpose, "status": "processed"})
        return True
    if method == "PUT" and len(parts) == 2 and parts[0] == "upload":
        with owner._lock:
            owner.files[parts[1]] = raw
        handler._send_bytes(200, b"", "text/plain")
        return True
    if method == "POST" and len(parts) == 4 and parts[:2] == ["v1", "files"] and parts[3] == "preprocess":
        with owner._lock:
            content = owner.files.get(parts[2], b"")
        # The upload response Together documents: Processed, FileType and LineCount included.
        handler._send_json(200, {"id": parts[2], "object": "file", "bytes": len(content),
                                 "created_at": _now(), "filename": "batch.jsonl",
                                 "purpose": "batch-api", "Processed": True, "FileType": "jsonl",
                                 "LineCount": len(content.splitlines()),
                                 "processing_status": "COMPLETED"})
        return True
    if method == "GET" and len(parts) == 4 and parts[:2] == ["v1", "files"] and parts[3] == "content":
        with owner._lock:
            data = owner.files.get(parts[2])
        if data is None:
            handler._send_json(404, {"error": {"message": "no such file", "type": "not_found"}})
        else:
            handler._send_bytes(200, data, "application/octet-stream")
        return True
    if method == "POST" and path == "/v1/batches":
        body = json.loads(raw or b"{}")
        with owner._lock:
            data = owner.files.get(body.get("input_file_id"))
        if data is None:
            handler._send_json(400, {"error": {"message": "unknown input_file_id",
                                               "type": "invalid_request_error"}})
            return True
        lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        batch_id = f"batch_{uuid.uuid4().hex[:16]}"
        together = body.get("input_file_id") in owner.together_files
        _register(owner, batch_id, "openai", lines, body)
        with owner._lock:
            owner.batches[batch_id]["together"] = together
        if together:
            handler._send_json(200, {"job": _together_job(owner, batch_id), "warning": None})
        else:
            handler._send_json(200, _openai_batch(owner, batch_id))
        return True
    if method == "GET" and len(parts) == 3 and parts[1] == "batches" \
            and f"batches/{parts[2]}" in owner.batches:  # the SDK's API version may vary
        batch_id = f"batches/{parts[2]}"
        if _known(handler, owner, batch_id):
            _maybe_finish(owner, batch_id)
            handler._send_json(200, _google_batch(owner, batch_id))
        return True
    if method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "batches"]:
        if _known(handler, owner, parts[2]):
            _maybe_finish(owner, parts[2])
            if owner.batches[parts[2]].get("together"):
                handler._send_json(200, _together_job(owner, parts[2]))
            else:
                handler._send_json(200, _openai_batch(owner, parts[2]))
        return True
    if method == "POST" and path.endswith(":batchGenerateContent") and "/models/" in path:
        body = json.loads(raw or b"{}")
        model = path.rsplit("/models/", 1)[1][: -len(":batchGenerateContent")]
        requests = ((body.get("batch") or {}).get("inputConfig") or {}).get("requests") or {}
        items = [{"custom_id": (item.get("metadata") or {}).get("key"),
                  "params": {**item.get("request", {}), "model": model}}
                 for item in requests.get("requests") or []]
        batch_id = f"batches/{uuid.uuid4().hex[:16]}"
        _register(owner, batch_id, "google", items, {})
        handler._send_json(200, _google_batch(owner, batch_id))
        return True
    if method == "POST" and path == "/v1/messages/batches":
        body = json.loads(raw or b"{}")
        batch_id = f"msgbatch_{uuid.uuid4().hex[:16]}"
        _register(owner, batch_id, "anthropic", body.get("requests") or [], {})
        handler._send_json(200, _anthropic_batch(handler, owner, batch_id))
        return True
    if method == "GET" and parts[:3] == ["v1", "messages", "batches"] and len(parts) in (4, 5):
        if not _known(handler, owner, parts[3]):
            return True
        _maybe_finish(owner, parts[3])
        if len(parts) == 4:
            handler._send_json(200, _anthropic_batch(handler, owner, parts[3]))
        else:
            with owner._lock:
                results = owner.batches[parts[3]].get("results") or []
            body = "\n".join(json.dumps(r) for r in results).encode()
            handler._send_bytes(200, body, "application/binary")
        return True
    return False


def _known(handler: Any, owner: Any, batch_id: str) -> bool:
    with owner._lock:
        known = batch_id in owner.batches
    if not known:
        handler._send_json(404, {"error": {"message": f"no batch {batch_id}", "type": "not_found"}})
    return known


def _register(owner: Any, batch_id: str, api: str, items: list, body: dict) -> None:
    with owner._lock:
        owner.batches[batch_id] = {
            "api": api, "items": items, "created": time.monotonic(), "created_at": _now(),
            "custom_ids": [item.get("custom_id") for item in items], "status": "in_progress",
            "input_file_id": body.get("input_file_id"), "endpoint": body.get("endpoint"),
            "results": None, "output_file_id": None, "error_file_id": None,
        }
        owner.batch_items += len(items)


def _maybe_finish(owner: Any, batch_id: str) -> None:
    """Answer every item of a batch whose delay is over (once)."""
    from fake_llm_server import _prompt_tokens, count_tokens, documented_refusal

    with owner._lock:
        batch = owner.batches[batch_id]
        if batch["status"] != "in_progress" or time.monotonic() - batch["created"] < owner.batch_delay:
            return
        batch["status"] = "finalizing"
        ending = owner.batch_endings.pop(0) if owner.batch_endings else "completed"
    api = batch["api"]
    if ending != "completed":
        _end_unanswered(owner, batch, ending)
        return
    results, errors = [], []
    for item in batch["items"]:
        body = item.get("body") if api == "openai" else item.get("params")
        req = owner._parse_body(api, body or {}, "batch")
        req["batch_id"] = batch_id
        owner._record(req)
        refusal = (documented_refusal(req, owner.reasoning_models, frozenset(owner.anthropic_no_sampling))
                   if owner.enforce_rules else None)
        if refusal is not None:
            owner._record_refusal(req)
            response = refusal
        else:
            response, _ = owner._next_response(req)
        custom_id = item.get("custom_id")
        if response.status >= 400 or response.text is None:
            refused = _json_or_none(response.raw_body)  # a refusal's error body, as sent online
            message = ((refused or {}).get("error") or {}).get("message") or response.text \
                or f"fake error {response.status}"
            if api == "google":
                results.append({"error": {"code": response.status, "message": message},
                                "metadata": {"key": custom_id}})
            elif api == "openai":
                errors.append({"id": f"batch_req_{uuid.uuid4().hex[:8]}", "custom_id": custom_id,
                               "response": {"status_code": response.status or 500,
                                            "request_id": uuid.uuid4().hex,
                                            "body": refused or {"error": {"message": message}}},
                               "error": None})
            else:
                results.append({"custom_id": custom_id, "result": {
                    "type": "errored", "error": refused or {"type": "error", "error": {
                        "type": "api_error", "message": message}}}})
            continue
        prompt, completion = _prompt_tokens(req), count_tokens(response.text)
        model = req["model"] or "fake-model"
        if api == "google":
            results.append({"metadata": {"key": custom_id}, "response": {
                "candidates": [{"content": {"role": "model", "parts": [{"text": response.text}]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion,
                                  "totalTokenCount": prompt + completion},
                "modelVersion": model}})
        elif api == "openai":
            results.append({"id": f"batch_req_{uuid.uuid4().hex[:8]}", "custom_id": custom_id,
                            "response": {"status_code": 200, "request_id": uuid.uuid4().hex, "body": {
                                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                                "created": _now(), "model": model,
                                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                             "message": {"role": "assistant", "content": response.text,
                                                         "refusal": None}}],
                                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                          "total_tokens": prompt + completion}}},
                            "error": None})
        else:
            results.append({"custom_id": custom_id, "result": {"type": "succeeded", "message": {
                "id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
                "model": model, "content": [{"type": "text", "text": response.text}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": completion}}}})
    results, errors = provider_order(owner, batch, results), provider_order(owner, batch, errors)
    with owner._lock:
        batch["results"] = results
        batch["errors"] = errors
        if api == "openai":
            out_id = f"file-{uuid.uuid4().hex[:16]}"
            owner.files[out_id] = "\n".join(json.dumps(r) for r in results).encode()
            batch["output_file_id"] = out_id if results else None
            if errors:
                err_id = f"file-{uuid.uuid4().hex[:16]}"
                owner.files[err_id] = "\n".join(json.dumps(r) for r in errors).encode()
                batch["error_file_id"] = err_id
        batch["status"] = "ended"


def provider_order(owner: Any, batch: dict, results: list) -> list:
    """``results`` in the order a provider that promises none might write them: shuffled
    (seeded), and never in submission order when there are two or more."""
    shuffled = list(results)
    random.Random(f"{owner.batch_order_seed}:{batch['custom_ids']}").shuffle(shuffled)
    if len(shuffled) > 1 and shuffled == results:
        shuffled = shuffled[1:] + shuffled[:1]
    return shuffled


def _json_or_none(raw: bytes | None) -> Any:
    try:
        return json.loads(raw) if raw is not None else None
    except ValueError:
        return None


ENDINGS = ("expired", "cancelled", "failed")


def _end_unanswered(owner: Any, batch: dict, ending: str) -> None:
    """End a batch ``ending`` (expired, cancelled, failed) without answering any item."""
    if ending not in ENDINGS:
        raise ValueError(f"batch_endings: {ending!r} is not one of {ENDINGS}")
    api = batch["api"]
    results, errors = [], []
    if api == "anthropic":
        kind = "canceled" if ending == "cancelled" else "expired"
        results = [{"custom_id": item.get("custom_id"), "result": {"type": kind}}
                   for item in batch["items"]]
    elif api == "openai" and not batch.get("together") and ending != "failed":
        errors = [{"id": f"batch_req_{uuid.uuid4().hex[:8]}", "custom_id": item.get("custom_id"),
                   "response": None,
                   "error": {"code": f"batch_{ending}",
                             "message": f"This request could not be executed before the batch {ending}."}}
                  for item in batch["items"]]
    results, errors = provider_order(owner, batch, results), provider_order(owner, batch, errors)
    with owner._lock:
        batch["results"], batch["errors"], batch["ending"] = results, errors, ending
        if errors:
            err_id = f"file-{uuid.uuid4().hex[:16]}"
            owner.files[err_id] = "\n".join(json.dumps(r) for r in errors).encode()
            batch["error_file_id"] = err_id
        batch["status"] = "ended"


def _openai_batch(owner: Any, batch_id: str) -> dict:
    with owner._lock:
        b = dict(owner.batches[batch_id])
    done = b["results"] is not None
    n = len(b["items"])
    failed = len(b.get("errors") or []) if done else 0
    status = (b.get("ending") or "completed") if done else "in_progress"
    return {"id": batch_id, "object": "batch", "endpoint": b["endpoint"] or "/v1/chat/completions",
            "input_file_id": b["input_file_id"], "completion_window": "24h",
            "status": status, "created_at": b["created_at"],
            "output_file_id": b["output_file_id"], "error_file_id": b["error_file_id"],
            "request_counts": {"total": n, "completed": len(b["results"]) if done else 0,
                               "failed": failed},
            "errors": {"object": "list", "data": [{"code": "batch_failed", "line": None, "param": None,
                                                   "message": "The batch failed."}]}
            if status == "failed" else None,
            "metadata": None}


def _google_batch(owner: Any, batch_id: str) -> dict:
    with owner._lock:
        b = dict(owner.batches[batch_id])
    done = b["results"] is not None
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(b["created_at"]))
    metadata = {"@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                "name": batch_id, "state": (f"BATCH_STATE_{(b.get('ending') or 'succeeded').upper()}"
                                            if done else "BATCH_STATE_RUNNING"),
                "createTime": stamp, "updateTime": stamp,
                "batchStats": {"requestCount": str(len(b["items"])),
                               "successfulRequestCount": str(sum("response" in r for r in b["results"]))
                               if done else "0"}}
    if done:
        metadata["endTime"] = stamp
    if done and not b.get("ending"):
        metadata["output"] = {"inlinedResponses": {"inlinedResponses": b["results"]}}
    return {"name": batch_id, "metadata": metadata, "done": done}


def _together_job(owner: Any, batch_id: str) -> dict:
    with owner._lock:
        b = dict(owner.batches[batch_id])
    done = b["results"] is not None
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(b["created_at"]))
    status = (b.get("ending") or "completed").upper() if done else "IN_PROGRESS"
    return {"id": batch_id, "status": status,
            "endpoint": b["endpoint"], "input_file_id": b["input_file_id"],
            "output_file_id": b["output_file_id"], "error_file_id": b["error_file_id"],
            "progress": 100.0 if done else 0.0, "created_at": stamp,
            "completed_at": stamp if done else None}


def _anthropic_batch(handler: Any, owner: Any, batch_id: str) -> dict:
    with owner._lock:
        b = dict(owner.batches[batch_id])
    done = b["results"] is not None
    n = len(b["items"])
    types = [r["result"]["type"] for r in b["results"]] if done else []
    base = f"http://127.0.0.1:{handler.server.server_address[1]}"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(b["created_at"]))
    return {"id": batch_id, "type": "message_batch",
            "processing_status": "ended" if done else "in_progress",
            "request_counts": {"processing": 0 if done else n, "succeeded": types.count("succeeded"),
                               "errored": types.count("errored"), "canceled": types.count("canceled"),
                               "expired": types.count("expired")},
            "created_at": stamp, "expires_at": stamp, "ended_at": stamp if done else None,
            "cancel_initiated_at": None, "archived_at": None,
            "results_url": f"{base}/v1/messages/batches/{batch_id}/results" if done else None}
