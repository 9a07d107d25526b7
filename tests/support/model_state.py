"""What the tests reset between servers: the model layer's process-wide clients and rate limiters
(the product keeps them for a process's life: one client and one limiter per endpoint)."""
from __future__ import annotations

from cupid.utils.models import hosted, pacing


def reset_clients() -> None:
    """Close and forget every shared SDK client."""
    with hosted._clients_lock:
        clients = list(hosted.CLIENTS.values())
        hosted.CLIENTS.clear()
    for client in clients:
        if callable(getattr(client, "close", None)):
            client.close()


def reset_limiters() -> None:
    """Forget every endpoint's limiter and the user's --rate_limit limits."""
    with pacing._lock:
        pacing._LIMITERS.clear()
        pacing._USER_LIMITS.clear()
