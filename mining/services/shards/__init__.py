"""A sentence run as stages of checkpointed shard tasks, executed by any number of workers or in one process.

    plan -> embed (src shards, tgt shards) -> [IVF: train (1) -> index (one per base shard, each side)]
         -> search (src query shards vs the tgt index shards, tgt query shards vs the src ones; top-k merged)
         -> score (1) -> filter (candidate chunks) -> write (candidate chunks, COPY) -> finish (1)

Every shard is one `RunShard` row: a worker claims it with a lease (renewed while it works), writes its output
under PCAPP_DATA_DIR/runs/run-<id>/ (temp file, then an atomic rename) and then sets `finished_at` (a write shard
does its COPY and sets `finished_at` in one transaction). A shard whose row is done is skipped; one whose lease
expired is taken over. So a retried, re-delivered or re-planned shard never runs twice to completion, and which
stage comes next, and which of its shards are missing, is read from the rows alone (`run_kick`).

Distributed (the Celery path): `sharded_run_start` takes the run and dispatches the first stage as a Celery group of
shard tasks, each routed to its stage's queue (`embed`, `index`, `search`, `io`). The shard that completes a stage
moves `run.stage` on with a conditional UPDATE, and only that shard dispatches the next stage's group (a join
counted in Postgres instead of a chord's counter in a result backend, so it needs none and survives redelivery).
A keeper thread in every worker (`sharded_runs_keep`) renews the leases of the running distributed runs, re-queues
shards whose holder died, and re-dispatches a stage that stopped moving; when no worker is left, the run's lease
expires and the run shows as stalled (retry resumes it).

In one process (`run_inline`, what `manage.py mine` and the tests' `execute_job` use) the same shard functions run
one after the other, so both paths write the same candidates. Embeddings are always searched as the float16 values
the embedding cache holds, so a resumed run equals an uninterrupted one.

Modules: `plan` (the stages, the plan, the run's files), `rows` (shard rows and leases), `context` (what a shard
function reads), `stages` (plan, embed, train, index, search; the `STAGE_FN` table), `candidates` (score, filter,
write, finish; filters and candidate rows), `dispatch` (executing a shard, dispatch, keeper, the in-process path).
"""

from .dispatch import run_inline, run_kick, shard_execute, shard_task_body, sharded_run_start, sharded_runs_keep
from .plan import STAGES, Plan, ShardError, run_dir, run_files_delete
from .rows import current_stage, run_progress, shard_claim

__all__ = [
    "Plan",
    "STAGES",
    "ShardError",
    "current_stage",
    "run_dir",
    "run_files_delete",
    "run_inline",
    "run_kick",
    "run_progress",
    "shard_claim",
    "shard_execute",
    "shard_task_body",
    "sharded_run_start",
    "sharded_runs_keep",
]
