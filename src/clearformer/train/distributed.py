"""Running one `train` in several processes (torchrun) with DistributedDataParallel.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT; `setup` joins the
process group (gloo on CPU, nccl on GPU). Every process builds the same batch stream; an
optimizer step consumes world_size * accum consecutive batches and process r trains on its
own `accum` of them, so N processes with accum=1 see exactly the batches of one process with
accum=N. Gradients are scaled by the step's total label count, which makes the update (and the
loss) equal to the single-process one up to float rounding.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def setup(device: torch.device) -> World:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1); else a world of one."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World()
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def teardown(world: World) -> None:
    if world.distributed and dist.is_initialized():
        dist.destroy_process_group()


def all_sum(values: list[float], world: World, device: torch.device) -> list[float]:
    """Sum a few numbers over all processes (identity in a world of one)."""
    if not world.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def broadcast_flag(flag: bool, world: World, device: torch.device) -> bool:
    """Process 0's decision (stop now, for example), made the same everywhere."""
    if not world.distributed:
        return flag
    tensor = torch.tensor([1 if flag else 0], dtype=torch.int64, device=device)
    dist.broadcast(tensor, src=0)
    return bool(tensor.item())


def stop_flags(main_stop: bool, signalled: bool, world: World, device: torch.device) -> tuple[bool, bool]:
    """(process 0's decision to stop, whether any process received a stop signal), the same everywhere:
    one all-reduce (max) per step, so a SIGTERM that reaches one worker stops all at the same step."""
    if not world.distributed:
        return main_stop, signalled
    tensor = torch.tensor([1 if main_stop and world.is_main else 0, 1 if signalled else 0], dtype=torch.int64,
                          device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return bool(tensor[0].item()), bool(tensor[1].item())


def gather_rng_states(world: World) -> dict[str, torch.Tensor]:
    """Every process's CPU (and CUDA) random generator state, keyed by rank, on every process."""
    local = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        local["cuda"] = torch.cuda.get_rng_state()
    if not world.distributed:
        return {f"{name}.rank0": state for name, state in local.items()}
    states = {}
    for name, state in local.items():
        # gloo gathers CPU tensors; nccl needs them on the GPU.
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
        parts = [torch.empty_like(state, device=device) for _ in range(world.size)]
        dist.all_gather(parts, state.to(device))
        states.update({f"{name}.rank{r}": part.cpu() for r, part in enumerate(parts)})
    return states


def restore_rng_state(states: dict[str, torch.Tensor], world: World) -> bool:
    """Load this process's generator state saved under rng.<kind>.rank<r>; False if absent."""
    cpu = states.get(f"rng.cpu.rank{world.rank}")
    if cpu is None:
        return False
    torch.set_rng_state(cpu)
    cuda = states.get(f"rng.cuda.rank{world.rank}")
    if cuda is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(cuda)
    return True


def barrier(world: World) -> None:
    if world.distributed:
        dist.barrier()
