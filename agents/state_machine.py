"""The routing state machine of the Planner/Coder/Verifier loop. Pure: no I/O, no clock.

After every verified Coder turn, ``observe(outcome, elapsed_s)`` returns the next ``Decision``:

- ``retry``: the candidate failed (did not build, crashed, wrong); fix it, same subtask;
- ``optimize``: correct but below ``target_speedup`` on the last subtask; make it faster;
- ``advance``: correct; move on to the next subtask, building on this code;
- ``replan``: ``replan_after_failed`` consecutive failures or ``replan_after_stagnant``
  correct-but-not-faster turns (or the subtask's attempts ran out) and replans are left;
- ``stop``: with a reason from ``STOP_REASONS``.

Budgets (``conf/agents/default.yaml``): attempts per subtask, replans, total turns and
wall-clock per trajectory. Best-so-far (correct candidates only, highest speedup) is tracked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ACTIONS = ("retry", "optimize", "advance", "replan", "stop")
STOP_REASONS = (
    "target_reached",      # last subtask correct and at least target_speedup
    "attempts_exhausted",  # the subtask's attempts ran out and no replan is left
    "stagnant",            # no faster candidate for replan_after_stagnant turns, no replan left
    "max_turns",           # the trajectory's turn budget is spent
    "timeout",             # trajectory_timeout_s elapsed
    "backend_error",       # the LLM backend could not answer (set by the loop)
    "cancelled",           # the run was interrupted (set by the loop)
)
_EPS = 1e-3  # a speedup gain below 0.1 % counts as stagnant


@dataclass(frozen=True)
class Budgets:
    attempts_per_subtask: int = 3
    replans: int = 2
    replan_after_failed: int = 2
    replan_after_stagnant: int = 2
    target_speedup: float = 1.0
    max_turns: int = 24
    trajectory_timeout_s: float = 5400.0

    @classmethod
    def from_mapping(cls, m) -> Budgets:
        names = cls.__dataclass_fields__
        return cls(**{k: type(getattr(cls, k))(m[k]) for k in names if k in m})


@dataclass(frozen=True)
class Outcome:
    """What the state machine needs of one verified candidate."""
    correct: bool
    speedup: float | None = None
    status: str = "ok"


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str


@dataclass
class Best:
    turn: int | None = None
    speedup: float | None = None
    correct: bool = False


@dataclass
class StateMachine:
    budgets: Budgets
    n_subtasks: int = 1
    subtask: int = 0
    attempt: int = 0          # coder turns on the current subtask (since the last replan)
    replans_used: int = 0
    turns: int = 0            # verified coder turns in the trajectory
    failed_streak: int = 0
    stagnant_streak: int = 0
    best: Best = field(default_factory=Best)
    history: list[Decision] = field(default_factory=list)
    stop_reason: str | None = None

    @property
    def last_subtask(self) -> bool:
        return self.subtask >= self.n_subtasks - 1

    def _decide(self, action: str, reason: str) -> Decision:
        d = Decision(action, reason)
        self.history.append(d)
        if action == "stop":
            self.stop_reason = reason
        elif action == "advance":
            self.subtask += 1
            self.attempt = self.failed_streak = self.stagnant_streak = 0
        elif action == "replan":
            self.replans_used += 1
            self.attempt = self.failed_streak = self.stagnant_streak = 0
        return d

    def stop(self, reason: str) -> Decision:
        """Stop from outside (backend error, cancellation); recorded like any other stop."""
        assert reason in STOP_REASONS, reason
        return self._decide("stop", reason)

    def replanned(self, n_subtasks: int) -> None:
        """A new plan arrived: start at its first subtask."""
        self.n_subtasks, self.subtask = max(1, n_subtasks), 0

    def _improves(self, speedup: float | None) -> bool:
        if not self.best.correct:
            return True
        s, b = speedup or 0.0, self.best.speedup or 0.0
        return s > b * (1 + _EPS)

    def _out_of_attempts(self, why: str) -> Decision:
        if self.replans_used < self.budgets.replans:
            return self._decide("replan", why)
        return self._decide("stop", "attempts_exhausted")

    def observe(self, outcome: Outcome, elapsed_s: float = 0.0) -> Decision:
        b = self.budgets
        turn = self.turns
        self.turns += 1
        self.attempt += 1
        improved = False
        if outcome.correct:
            self.failed_streak = 0
            improved = self._improves(outcome.speedup)
            if improved:
                self.best = Best(turn, outcome.speedup, True)
                self.stagnant_streak = 0
            else:
                self.stagnant_streak += 1
        else:
            self.failed_streak += 1
        on_target = self.best.correct and (self.best.speedup or 0.0) >= b.target_speedup

        # Goal first: a correct, fast final program ends the trajectory whatever the budgets.
        if outcome.correct and self.last_subtask and on_target:
            return self._decide("stop", "target_reached")
        if elapsed_s >= b.trajectory_timeout_s:
            return self._decide("stop", "timeout")
        if self.turns >= b.max_turns:
            return self._decide("stop", "max_turns")

        if outcome.correct:
            if not self.last_subtask:
                return self._decide("advance", f"subtask {self.subtask} correct")
            if self.stagnant_streak >= b.replan_after_stagnant:
                if self.replans_used < b.replans:
                    return self._decide("replan", f"{self.stagnant_streak} turns without a "
                                        "faster candidate")
                return self._decide("stop", "stagnant")
            if self.attempt >= b.attempts_per_subtask:
                return self._out_of_attempts("attempts spent below target speedup")
            return self._decide("optimize", f"correct at {outcome.speedup or 0:.2f}x, "
                                f"target {b.target_speedup:.2f}x")
        if self.failed_streak >= b.replan_after_failed and self.replans_used < b.replans:
            return self._decide("replan", f"{self.failed_streak} failed attempts in a row")
        if self.attempt >= b.attempts_per_subtask:
            return self._out_of_attempts(f"{self.attempt} attempts failed")
        return self._decide("retry", f"{outcome.status}")
