"""A worker's execution: where each task runs and how its answer comes back.

The story, in order: `execution.Execution` takes a `RunTask`; `call.Calls.prepare` finds
the function and rebuilds its arguments; the call runs inline on the loop (`inline`), on a
runner thread (`runners`) or as a coroutine; `call.run_call` / `call.encode_results` turn
what it returned into an `Outcome`, handed back to the core in batches. Actors run on a
thread of their own (`worker_actors`), checkpointed to a store (`checkpoints`).
"""
