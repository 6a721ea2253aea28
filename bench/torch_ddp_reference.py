#!/usr/bin/python3
"""PyTorch DDP reference for bench/ddp_compare.sh: the job ringleader's demo trains, as
torchrun users write it. N ranks on this host over gloo, one BLAS/OpenMP thread per rank,
MLP 784-256-128-10, SGD with momentum, batch B per rank, Fashion-MNIST from Debian's IDX files.

Prints one line: "torch_ddp ranks=N samples_per_second=R steps=S" where R counts training steps
only (forward, backward, all-reduce, optimizer), like ringleader's verdict: the data is in memory
before the clock starts and evaluation is not timed.
"""
import argparse
import gzip
import os
import socket
import struct
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler


def read_idx(path: str) -> torch.Tensor:
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4 : 4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims :]), dtype=torch.uint8).reshape(shape)


def load(path: str, limit: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = read_idx(os.path.join(path, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(path, "train-labels-idx1-ubyte.gz"))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    return images.reshape(len(images), -1).float() / 255.0, labels.long()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(rank: int, args: argparse.Namespace, port: int) -> None:
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.manual_seed(args.seed)
    x, y = load(args.data, args.max_train_examples)
    layers = [int(w) for w in args.layers.split(",")]
    blocks: list[nn.Module] = []
    for i in range(len(layers) - 1):
        blocks.append(nn.Linear(layers[i], layers[i + 1]))
        if i + 2 < len(layers):
            blocks.append(nn.ReLU())
    model = DistributedDataParallel(nn.Sequential(*blocks))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(x)), num_replicas=args.ranks, rank=rank,
                                 shuffle=True, seed=args.seed)
    steps = 0
    elapsed = 0.0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler))
        batches = [order[i : i + args.batch] for i in range(0, len(order), args.batch)]
        dist.barrier()
        start = time.perf_counter()
        for index in batches:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[index]), y[index])
            loss.backward()
            optimizer.step()
            steps += 1
        elapsed += time.perf_counter() - start
    slowest = torch.tensor([elapsed])
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    if rank == 0:
        rate = steps * args.batch * args.ranks / slowest.item()
        print(f"torch_ddp ranks={args.ranks} samples_per_second={rate:.0f} steps={steps}",
              flush=True)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--layers", default="784,256,128,10")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight_decay", type=float, default=0.0005)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--max_train_examples", type=int, default=0)
    args = parser.parse_args()
    mp.spawn(run, args=(args, free_port()), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
