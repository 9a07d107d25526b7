#!/usr/bin/env bash
# Serve PrefMatcher-7B (kixlab/prefmatcher-7b) with vLLM's OpenAI-compatible server at
# http://localhost:8000/v1, for `python -m evaluation.run ... --use_matcher`.
# Needs a GPU and `pip install vllm`; the weights download from the Hugging Face hub.
#
# Settings (environment variables; any further argument is passed to `vllm serve` as is,
# e.g. `bash evaluation/serve_prefmatcher.sh --enable-prefix-caching`):
#   MAX_MODEL_LEN=32768   the context vLLM serves (--max-model-len). The harness asks the
#                         matcher with max_tokens 8192, as the released harness did, and vLLM
#                         refuses any request whose prompt + max_tokens exceeds this length,
#                         so it must hold the longest matcher prompt + 8192. PrefMatcher-7B is
#                         Qwen2.5-7B-Instruct fine-tuned (QLoRA), whose context is 32,768 tokens.
#                         The harness reads it from /v1/models before any paid call and stops
#                         when a request of the run would not fit.
#   TENSOR_PARALLEL=1     GPUs that hold one copy of the model (--tensor-parallel-size); 1 is
#                         enough for a 7B model on a 24 GB GPU.
#   DATA_PARALLEL=1       copies of the model behind this one endpoint (--data-parallel-size),
#                         each on TENSOR_PARALLEL GPUs: DATA_PARALLEL=4 uses 4 GPUs for ~4x
#                         the throughput. (Or start one server per GPU, each with its own
#                         PORT and CUDA_VISIBLE_DEVICES, and pass every URL to the harness:
#                         --matcher_url http://host:8000/v1,http://host:8001/v1.)
#   GPU_MEMORY_UTILIZATION=0.9   the share of each GPU's memory vLLM may take for weights
#                         and KV cache (--gpu-memory-utilization; vLLM's default); lower it
#                         when the GPU is shared.
#   PORT=8000             the port (the harness's default --matcher_url is
#                         http://localhost:8000/v1; CUPID_PREFMATCHER_URL also sets it).
#   CUPID_PREFMATCHER_MODEL=kixlab/prefmatcher-7b   the weights; also the name served and
#                         the name the harness asks for.
set -euo pipefail
PORT="${PORT:-8000}"
MODEL="${CUPID_PREFMATCHER_MODEL:-kixlab/prefmatcher-7b}"
MAX_MODEL_LEN="${MAX_MODEL_LEN:-32768}"
TENSOR_PARALLEL="${TENSOR_PARALLEL:-1}"
DATA_PARALLEL="${DATA_PARALLEL:-1}"
GPU_MEMORY_UTILIZATION="${GPU_MEMORY_UTILIZATION:-0.9}"
parallel=(--tensor-parallel-size "$TENSOR_PARALLEL")
if [ "$DATA_PARALLEL" != "1" ]; then  # older vLLM releases have no --data-parallel-size
    parallel+=(--data-parallel-size "$DATA_PARALLEL")
fi
exec vllm serve "$MODEL" --port "$PORT" --dtype auto \
    --max-model-len "$MAX_MODEL_LEN" \
    --gpu-memory-utilization "$GPU_MEMORY_UTILIZATION" \
    "${parallel[@]}" "$@"
