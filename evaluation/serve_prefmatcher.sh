#!/usr/bin/env bash
# Serve PrefMatcher-7B (kixlab/prefmatcher-7b) with vLLM's OpenAI-compatible server at
# http://localhost:8000/v1, for `python -m evaluation.run ... --use_matcher`.
# Needs a GPU and `pip install vllm`; the weights download from the Hugging Face hub.
# Override the port with PORT=..., and point the harness at another URL with
# --matcher_url or CUPID_PREFMATCHER_URL.
set -euo pipefail
PORT="${PORT:-8000}"
MODEL="${CUPID_PREFMATCHER_MODEL:-kixlab/prefmatcher-7b}"
exec vllm serve "$MODEL" --port "$PORT" --dtype auto --max-model-len 8192 "$@"
