"""ringleader: run a PyTorch DDP script as a ringleader job and let the coordinator judge it.

    import ringleader.torch as rl

    watcher = rl.watch(ddp_model, optimizer)   # once, after DDP(...) and before the first step
    for x, y in batches:
        loss = loss_fn(ddp_model(x), y)
        loss.backward()
        watcher.report_loss(loss)              # optional: the coordinator sees the loss
        optimizer.step()                       # closes and reports the step

A failure of the job itself (bad arguments, data the script cannot use: running it again fails
again) is said by raising `ringleader.JobError`: the coordinator then fails the job without a
restart. Any other exception or crash is judged by the script's exit (restarted under
max_restarts).

`ringleader.torch` imports torch; this module does not (checkpoint helpers, JobError).
"""
import os as _os
import sys as _sys

from ringleader._checkpoint import checkpoint_dir, latest_checkpoint

__all__ = ["JobError", "checkpoint_dir", "latest_checkpoint"]


class JobError(Exception):
    """Raised, and not caught, for a failure of the job itself: it is not restarted."""


def _say_job_error(kind, value, traceback):
    """sys.excepthook: an uncaught JobError writes JOB_ERROR to $RINGLEADER_FAILURE_FILE (the
    launcher reads it once the script exited); then the usual traceback."""
    path = _os.environ.get("RINGLEADER_FAILURE_FILE")
    if path and isinstance(value, JobError):
        try:
            with open(path, "w", encoding="ascii") as out:
                out.write("JOB_ERROR\n")
        except OSError as error:
            print(f"[ringleader] could not write {path}: {error}", file=_sys.stderr)
    _previous_excepthook(kind, value, traceback)


_previous_excepthook = _sys.excepthook
_sys.excepthook = _say_job_error
__version__ = "0.1.0"
