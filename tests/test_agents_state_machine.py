"""State-machine transitions on scripted results (the released StitchCUDA budgets)."""

from agents.state_machine import Budgets, Outcome, StateMachine

OK = lambda s: Outcome(True, s, "ok")  # noqa: E731
BAD = Outcome(False, None, "incorrect")
CE = Outcome(False, None, "compile_error")


def run(outcomes, n_subtasks=1, **b):
    sm = StateMachine(Budgets(**b), n_subtasks)
    acts = []
    for o in outcomes:
        d = sm.observe(o)
        acts.append(d.action)
        if d.action == "replan":
            sm.replanned(n_subtasks)
        if d.action == "stop":
            break
    return sm, acts


def test_correct_and_fast_stops_at_target():
    sm, acts = run([OK(1.3)])
    assert acts == ["stop"] and sm.stop_reason == "target_reached"
    assert sm.best.turn == 0 and sm.best.speedup == 1.3


def test_failure_retries_then_replans_after_two_failures():
    sm, acts = run([CE, BAD, OK(1.1)])
    assert acts == ["retry", "replan", "stop"]
    assert sm.replans_used == 1 and sm.stop_reason == "target_reached"


def test_correct_but_slow_optimizes_then_replans_when_stagnant():
    sm, acts = run([OK(0.5), OK(0.5), OK(0.5)])
    assert acts == ["optimize", "optimize", "replan"]
    assert sm.best.turn == 0  # the first of equal speedups stays best


def test_advance_through_subtasks_then_stop():
    sm, acts = run([OK(0.4), OK(0.6), OK(1.2)], n_subtasks=3)
    assert acts == ["advance", "advance", "stop"]
    assert sm.subtask == 2 and sm.best.speedup == 1.2


def test_replans_exhausted_then_attempts_exhausted():
    sm, acts = run([BAD] * 20, replans=2, attempts_per_subtask=3)
    assert acts == ["retry", "replan", "retry", "replan", "retry", "retry", "stop"]
    assert sm.stop_reason == "attempts_exhausted" and not sm.best.correct


def test_stagnant_without_replans_stops_as_stagnant():
    sm, acts = run([OK(0.5), OK(0.5), OK(0.5)], replans=0)
    assert acts == ["optimize", "optimize", "stop"] and sm.stop_reason == "stagnant"


def test_improving_but_below_target_spends_attempts_then_replans():
    sm, acts = run([OK(0.3), OK(0.5), OK(0.7), OK(0.9)], replan_after_stagnant=5)
    assert acts == ["optimize", "optimize", "replan", "optimize"]
    assert sm.best.speedup == 0.9 and sm.best.turn == 3


def test_best_so_far_survives_later_failures():
    sm, acts = run([OK(0.5), BAD, BAD, BAD], replans=0)
    assert sm.best.turn == 0 and sm.best.correct and sm.best.speedup == 0.5
    assert acts[-1] == "stop" and sm.stop_reason == "attempts_exhausted"


def test_turn_and_time_budgets_stop_with_reason():
    sm, _ = run([BAD] * 10, max_turns=2)
    assert sm.turns == 2 and sm.stop_reason == "max_turns"
    sm = StateMachine(Budgets(trajectory_timeout_s=10))
    assert sm.observe(BAD, elapsed_s=11).action == "stop" and sm.stop_reason == "timeout"


def test_external_stop_is_recorded():
    sm = StateMachine(Budgets())
    sm.stop("backend_error")
    assert sm.stop_reason == "backend_error" and sm.history[-1].action == "stop"


def test_budgets_from_config_mapping():
    b = Budgets.from_mapping({"attempts_per_subtask": 5, "target_speedup": 2, "unrelated": 1})
    assert b.attempts_per_subtask == 5 and b.target_speedup == 2.0 and b.replans == 2
