"""The train loop's pieces that the GPU-only paths rely on, checked on the CPU."""

from __future__ import annotations

import torch

from autotune.objectives.train_loop import _own_gradients


def test_gradients_leave_the_memory_that_the_next_graph_replay_overwrites():
    # under CUDA graphs the first micro-batch's .grad is the compiled backward's output, in the
    # graphs' memory; a buffer stands in for it here, and the next replay refills it
    model = torch.nn.Linear(4, 3)
    graph_memory = torch.arange(15, dtype=torch.float32)
    model.weight.grad = graph_memory[:12].view(3, 4)
    model.bias.grad = graph_memory[12:]
    _own_gradients(model)
    graph_memory.fill_(-7.0)  # the next micro-batch's replay
    assert torch.equal(model.weight.grad, torch.arange(12, dtype=torch.float32).view(3, 4))
    assert torch.equal(model.bias.grad, torch.tensor([12.0, 13.0, 14.0]))
    # later micro-batches accumulate into them in place, as autograd does
    model(torch.ones(2, 4)).sum().backward()
    assert torch.equal(model.bias.grad, torch.tensor([14.0, 15.0, 16.0]))
