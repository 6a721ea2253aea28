"""ringleader: run a PyTorch DDP script as a ringleader job and let the coordinator judge it.

    import ringleader.torch as rl

    watcher = rl.watch(ddp_model, optimizer)   # once, after DDP(...) and before the first step
    for x, y in batches:
        loss = loss_fn(ddp_model(x), y)
        loss.backward()
        watcher.report_loss(loss)              # optional: the coordinator sees the loss
        optimizer.step()                       # closes and reports the step

`ringleader.torch` imports torch; this module does not (checkpoint helpers only).
"""
from ringleader._checkpoint import checkpoint_dir, latest_checkpoint

__all__ = ["checkpoint_dir", "latest_checkpoint"]
__version__ = "0.1.0"
