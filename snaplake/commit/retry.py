"""RetryPolicy: bounded, exponential, jittered backoff for lost publish races.

Every create-if-absent publish retries through it: a snapshot
(:class:`~snaplake.commit.snapshot_commit.SnapshotCommit`) and a schema
(:func:`~snaplake.commit.schema_alter.commit_schema_changes`). Pure: the
clock, the sleep and the random source are supplied by the caller, so tests
never sleep.

Source: Paimon ``FileStoreCommitImpl`` retry loop (``commit.max-retries``,
``commit.timeout``, ``commit.min-retry-wait`` doubling up to
``commit.max-retry-wait``, plus up to 20% jitter).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from snaplake.errors import CommitRetriesExhaustedError
from snaplake.options import CoreOptions

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How often and how long a commit retries after losing the race.

    Attributes:
        max_retries: Retries after the first attempt (attempts = retries + 1).
        timeout_s: Give up once this many seconds passed (``None`` = no limit).
        min_wait_s: Wait before the first retry, seconds.
        max_wait_s: Cap of the doubling wait, seconds.
        jitter: Fraction of the wait added at random (0.2 = up to +20%).
    """

    max_retries: int = 10
    timeout_s: float | None = None
    min_wait_s: float = 0.01
    max_wait_s: float = 10.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.min_wait_s < 0 or self.max_wait_s < self.min_wait_s:
            raise ValueError("need 0 <= min_wait_s <= max_wait_s")

    @classmethod
    def from_options(cls, options: CoreOptions) -> RetryPolicy:
        """Build the policy from a table's ``commit.*`` options."""
        timeout: timedelta | None = options.commit_timeout
        return cls(
            max_retries=options.commit_max_retries,
            timeout_s=timeout.total_seconds() if timeout is not None else None,
            min_wait_s=options.commit_min_retry_wait.total_seconds(),
            max_wait_s=options.commit_max_retry_wait.total_seconds(),
        )

    def wait_s(self, retry: int, *, random_fraction: float) -> float:
        """Seconds to wait before retry number ``retry`` (1-based).

        Args:
            retry: 1 for the first retry.
            random_fraction: A uniform number in [0, 1) from the caller's RNG.
        """
        base = min(self.min_wait_s * (2 ** (retry - 1)), self.max_wait_s)
        return float(base * (1.0 + self.jitter * random_fraction))

    def may_retry(self, *, retries_done: int, elapsed_s: float) -> bool:
        """Tell whether another attempt is allowed."""
        if retries_done >= self.max_retries:
            return False
        return self.timeout_s is None or elapsed_s < self.timeout_s

    def wait_or_give_up(
        self,
        *,
        attempts: int,
        elapsed_s: float,
        lost: str,
        sleep: Callable[[float], None],
        rng: Callable[[], float],
    ) -> None:
        """After ``attempts`` lost races: sleep before the next attempt, or give up.

        Args:
            attempts: Attempts made so far (all lost), >= 1.
            elapsed_s: Seconds since the first attempt began.
            lost: What lost, for the message (``"APPEND commit to db.t lost the
                race for a new snapshot"``).
            sleep: Sleeps seconds (tests inject one that does not).
            rng: Uniform [0, 1) numbers for the jitter (called only to sleep).

        Raises:
            CommitRetriesExhaustedError: no retry is left within
                ``max_retries`` and ``timeout_s`` (``.attempts``,
                ``.elapsed_s``); safe to retry later.
        """
        if not self.may_retry(retries_done=attempts - 1, elapsed_s=elapsed_s):
            raise CommitRetriesExhaustedError(
                f"{lost} {attempts} times in {elapsed_s:.1f} s; other writers are "
                "committing faster — retry later or raise commit.max-retries / commit.timeout",
                attempts=attempts,
                elapsed_s=elapsed_s,
            )
        sleep(self.wait_s(attempts, random_fraction=rng()))
