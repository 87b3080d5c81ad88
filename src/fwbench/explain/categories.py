"""The table that maps operator / kernel names to categories.

Each rule is (category, regular expression), tried in order against
"ancestors | name | type" in lower case; the first match wins. Ancestors matter: an
elementwise multiply inside PyTorch's `Optimizer.step` is optimizer time, and
TensorFlow ops under the optimizer's name scope (`sgd/...`) likewise. Users extend the
table with a YAML file of `category: [regex, ...]` (`fwbench explain --categories FILE`);
their rules are tried first.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from fwbench.errors import SpecError, broken_yaml

IDLE = "idle / framework overhead"
OTHER = "other ops"

DEFAULT_RULES: list[tuple[str, str]] = [
    # Collectives by their libraries' names: a bare "broadcast" would take PyTorch's
    # broadcast_tensors and TensorFlow's BroadcastTo, which move nothing between devices.
    # Before the optimizer: a collective is communication whatever scope it runs in (one
    # under an optimizer's name scope, `sgd/...CollectiveReduceV2`, read as the update).
    (
        "communication",
        r"allreduce|all_reduce|all-reduce|nccl|gloo|allgather|all-gather|c10d::|collective",
    ),
    # JAX: optax's update functions and its apply_updates, and a Keras optimizer's
    # stateless_apply and update_step, as a program's stack frames name them
    # (fwbench.explain.hlo).
    (
        "optimizer update",
        r"optimizer\.step|_foreach_|(^|[|/])sgd/|resourceapply|applymomentum|optimizer\.update"
        r"|update_fn|apply_updates|scale_by_|stateless_apply|update_step",
    ),
    ("recurrent", r"lstm|gru|rnn_|cudnnrnn|blocklstm"),
    # Not XLA's `convert` (a cast) nor Keras' convert_to_tensor.
    ("convolution", r"conv(?!ert)|depthwise"),
    # `gemm`: a kernel's name (cuBLAS, CUTLASS), never a Gemma model's layers.
    (
        "matmul / GEMM",
        r"matmul|addmm|aten::mm\b|aten::bmm|aten::linear|einsum|gemm(?!a)|\bdot\b",
    ),
    (
        "normalisation",
        r"batch_norm|batchnorm|layer_norm|layernorm|(^|[/_|])bn([_/]|$)|moments"
        r"|_compute_stats|_normalize\b|rmsnorm",
    ),
    # XLA's reduce-window among what an instruction holds (the last field: a pooling's,
    # and its gradient's, even where no frame names it; fwbench.explain.hlo calls one
    # over a single dimension a reduce), and eager JAX's programs of it
    # (jit_reduce_window_max).
    ("pooling", r"pool|reduce_window|\|[^|]*\sreduce-window(\s[^|]*)?$"),
    ("loss", r"cross_entropy|log_softmax|nll_loss|softmaxcrossentropy|sparse_categorical"),
    (
        "layout / copies",
        r"transpose|permute|copy|contiguous|reorder|memcpy|to_dense|mkltotf|inputconversion"
        r"|aten::to\b|aten::clone"
        # XLA's reverse, the kernel flipped for a convolution's input gradient.
        r"|(^|[| _])reverse(\.\d+)?( |$)",
    ),
    (
        "elementwise / activation",
        r"relu|add|mul|sub|div|sigmoid|tanh|gelu|softmax|exp|log|neg|sqrt|maximum|minimum"
        r"|bias|fill|zero|where|select|cast|convert|threshold|sum|mean|square",
    ),
]


class Categoriser:
    def __init__(self, extra: list[tuple[str, str]] | None = None) -> None:
        rules = [*(extra or []), *DEFAULT_RULES]
        # Names are matched lowercased, rules without regard to case: a user's rule is
        # kept as written (lowercased, its `\S` would read as `\s`).
        self.rules = [(name, re.compile(pattern, re.IGNORECASE)) for name, pattern in rules]
        self._cache: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        key = text.lower()
        found = self._cache.get(key)
        if found is None:
            found = next((name for name, rx in self.rules if rx.search(key)), OTHER)
            self._cache[key] = found
        return found


def load_rules(path: Path) -> list[tuple[str, str]]:
    """User rules from YAML `category: [regex, ...]`, validated."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise SpecError(f"cannot read categories file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise broken_yaml(f"categories file {path}", exc) from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: categories must be a mapping 'category: [regex, ...]'")
    rules = []
    for category, patterns in data.items():
        for pattern in patterns if isinstance(patterns, list) else [patterns]:
            try:
                re.compile(str(pattern), re.IGNORECASE)
            except re.error as exc:
                raise SpecError(
                    f"{path}: {category}: bad regular expression {pattern!r}: {exc}"
                ) from None
            rules.append((str(category), str(pattern)))
    return rules
