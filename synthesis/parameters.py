"""Generation parameters of each synthesis stage, as the release sends them.

kixlab/CUPID@a8560ca sets them in each module's constructor (synthesis/modules/*.py);
the values and their types (the decomposer's integer 0) are kept so that a request's
body is the release's.
"""
from __future__ import annotations

STAGE_PARAMS: dict[str, dict] = {
    "persona_generator": {"temperature": 0.7, "max_tokens": 4096},          # persona_generator.py
    "context_factors_generator": {"temperature": 1.0, "max_tokens": 8192},  # context_factors_generator.py
    "sessions_generator": {"temperature": 0.7, "max_tokens": 8192},         # sessions_generator.py
    "preference_decomposer": {"temperature": 0, "max_tokens": 4096},        # preference_decomposer.py
    "user_simulator": {"temperature": 0.3, "max_tokens": 8192},             # interaction_simulator.py
    "assistant_simulator": {"temperature": 0.7, "max_tokens": 2048},        # interaction_simulator.py
}

# Persona templates described per request (PersonaGenerator's batch_size).
PERSONA_BATCH_SIZE = 4
# The release seeds its template sampler with 42 (PersonaTemplateSampler.__call__).
SEED = 42
# A user simulator's answer that cannot be parsed is asked again this many times in all
# (UserSimulator.N_RETRIES), with the same request.
USER_SIMULATOR_TRIES = 3
