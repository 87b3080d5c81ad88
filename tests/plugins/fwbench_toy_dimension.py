"""A model with a dimension of its own, declared in one module: `toy_signal` reads a
two-channel signal of `length` samples, a dimension no built-in model has. Declaring it
(register_dimension) and the model (whose inputs are written in terms of it) is all it
takes: cases, the CLI's --dim, sweeps and the store take `length` like any dimension."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.models import ModelSpec, register, register_dimension
from fwbench.dimensions import Dimension

register_dimension(Dimension("length", "signal samples", minimum=3, maximum=1 << 16, short="len"))


def _torch_signal(length: int) -> Any:
    from torch import nn

    class Signal(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(2, 4, 3)
            self.head = nn.Linear(4, 3)

        def forward(self, x: Any) -> Any:
            # (batch, length, channels), as Keras reads it: PyTorch convolves channels first.
            return self.head(self.conv(x.transpose(1, 2)).mean(-1))

    return Signal()


def _keras_signal(length: int) -> Any:
    import keras

    return keras.Sequential(
        [
            keras.Input((length, 2)),
            keras.layers.Conv1D(4, 3),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(3),
        ]
    )


register(
    ModelSpec(
        name="toy_signal",
        family="test",
        input_kind="tensors",
        inputs="x=Bx{length}x2:float32",
        dims={"length": 32},
        objective="mean",
        builders={"torch": _torch_signal, "tensorflow": _keras_signal},
        description="a 1-D convolution over a signal of `length` samples (tests only)",
    )
)
