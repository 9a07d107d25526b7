"""Speed of the embedded model (smollm2-135m) on this machine.

    python benchmarks/embedded_model_speed.py [--repeats 3] [--prompt-words 750]
                                              [--gen-tokens 128] [--threads N]

Measures, through the model seam:
  * load time of the GGUF (first use in this process);
  * prompt processing: a ~1000-token prompt answered with max_tokens=1, tokens/s;
  * generation: the same prompt again with max_tokens=N. llama-cpp-python reuses the
    evaluated prefix of the previous call, so this call's time is (almost) all generation.
Each repetition starts with a different nonce so no prompt is served from that prefix reuse.
Prints the median of each figure over the repetitions.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WORDS = ("travel budget hotel quiet morning coffee museum train window seat meeting notes "
         "report deadline garden rain recipe spicy vegetarian friend weekend hiking trail map "
         "camera battery phone screen email draft summary project review feedback colleague "
         "city crowd beach sunset book chapter library music concert ticket price schedule").split()


def filler(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    sentences, count = [], 0
    while count < n_words:
        length = rng.randint(8, 16)
        words = [rng.choice(WORDS) for _ in range(length)]
        sentences.append(" ".join(words).capitalize() + ".")
        count += length
    return " ".join(sentences)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompt-words", type=int, default=750,
                        help="filler words in the prompt (750 words is about 1000 tokens)")
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None,
                        help="llama.cpp threads (sets CUPID_EMBEDDED_THREADS)")
    args = parser.parse_args()
    if args.threads is not None:
        os.environ["CUPID_EMBEDDED_THREADS"] = str(args.threads)

    import cupid.utils.models.smollm2 as smollm2
    from cupid.utils.models.registry import resolve_model

    model = resolve_model("smollm2-135m", max_retries=0)
    started = time.perf_counter()
    model.check()  # loads the model
    load_wall = time.perf_counter() - started

    prompt_rates, gen_rates, prompt_sizes, gen_sizes = [], [], [], []
    for rep in range(args.repeats):
        system = f"Session {rep}-{random.randrange(10**9)}. You are a helpful assistant."
        user = ("Here are my notes:\n" + filler(args.prompt_words, seed=rep) +
                "\n\nNow count from 1 to 300, separated by commas.")
        messages = [{"role": "user", "content": user}]

        t0 = time.perf_counter()
        first = model.generate(system, messages, max_tokens=1, temperature=0.0)
        t_prompt = time.perf_counter() - t0

        t0 = time.perf_counter()
        second = model.generate(system, messages, max_tokens=args.gen_tokens, temperature=0.0)
        t_gen = time.perf_counter() - t0

        prompt_sizes.append(first.usage.prompt_tokens)
        gen_sizes.append(second.usage.completion_tokens)
        prompt_rates.append(first.usage.prompt_tokens / t_prompt)
        gen_rates.append(second.usage.completion_tokens / t_gen)
        print(f"rep {rep}: prompt {first.usage.prompt_tokens} tok in {t_prompt:.2f}s "
              f"({prompt_rates[-1]:.1f} tok/s); generated {second.usage.completion_tokens} tok "
              f"in {t_gen:.2f}s ({gen_rates[-1]:.1f} tok/s)", flush=True)

    result = {
        "threads": smollm2.default_threads(),
        "cpu_count": os.cpu_count(),
        "load_s": round(smollm2.load_seconds if smollm2.load_seconds is not None else load_wall, 3),
        "prompt_tokens_median": statistics.median(prompt_sizes),
        "prompt_tok_per_s_median": round(statistics.median(prompt_rates), 1),
        "generated_tokens_median": statistics.median(gen_sizes),
        "gen_tok_per_s_median": round(statistics.median(gen_rates), 1),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
