"""What every framework that runs on JAX does the same way (Keras on JAX, Flax NNX): its
threads, its GPU memory and fp32 settings, its persistent compilation cache, its
versions and its errors. Imported in workers only; JAX itself is imported in
`configure_jax`, after the thread limit is applied: XLA sizes its CPU thread pool when it
starts.
"""

from __future__ import annotations

import os
import re
from typing import Any

from fwbench.case import Case
from fwbench.explain.hlo import module_name, op_texts
from fwbench.explain.timeline import PHASES, WINDOW, Event, Window

FLOP_METHOD = "the traced program's matrix products and convolutions (jaxpr)"


def jaxpr_flops(jaxpr: Any) -> float:
    """FLOPs of a program's matrix products and convolutions, as PyTorch's and
    TensorFlow's counters count theirs (two a multiply-add; elementwise ops not at all),
    from its jaxpr: each `dot_general` and `conv_general_dilated`, inside jitted calls,
    scans (times their length), remat and custom derivatives; a conditional by its
    costliest branch; a convolution by its output's positions, an input gradient's
    without the zeros a stride inserts. That is the work the program asks for: where a
    network pads its input explicitly (Keras' twins do, to pad as PyTorch does), its
    input gradients cover the padding too, and count more than PyTorch's, whose
    convolutions pad themselves. A while loop's trip count is not in its program:
    ValueError."""
    import math

    total = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            out = eqn.outvars[0].aval.shape
            total += 2.0 * math.prod(out) * math.prod(lhs[i] for i in contract)
        elif name == "conv_general_dilated":
            spec = eqn.params["dimension_numbers"].rhs_spec  # (out, in, spatial...)
            rhs = eqn.invars[1].aval.shape
            out = eqn.outvars[0].aval.shape
            taps = rhs[spec[1]] * math.prod(rhs[i] for i in spec[2:])
            # The input gradient of a strided convolution dilates its gradient by the
            # stride: the zeros it inserts are no work (PyTorch counts that gradient as
            # the forward pass, which this gives).
            dilated = math.prod(eqn.params.get("lhs_dilation") or (1,))
            total += 2.0 * math.prod(out) * taps / dilated
        elif name == "while":
            raise ValueError("a while loop's trip count is not in its program (lax.while_loop)")
        elif name == "scan":
            total += eqn.params["length"] * jaxpr_flops(eqn.params["jaxpr"].jaxpr)
        elif name == "cond":
            total += max(jaxpr_flops(branch.jaxpr) for branch in eqn.params["branches"])
        else:
            for inner in _inner_jaxprs(eqn.params):
                total += jaxpr_flops(inner)
    return total


def _inner_jaxprs(params: dict[str, Any]) -> list[Any]:
    """The programs an equation calls (a jitted function's, remat's, a custom
    derivative's forward), open or closed; not a custom derivative's rules (functions,
    not programs: their work is in the program where it was traced)."""
    found = []
    for value in params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                found.append(inner)
    return found


class JaxRuntime:
    """Mixed into an adapter (before its Adapter base): the JAX runtime's side of it."""

    # The packages whose functions name what an op computes (fwbench.explain.hlo).
    libraries: tuple[str, ...] = ()

    def count_flops(self, workload: Any) -> tuple[float, str]:
        """The FLOPs of one step from the programs it runs (`programs()`: each jitted or
        traceable function with its arguments and how many times a step runs it),
        traced again for the count (jaxpr_flops)."""
        import jax

        programs = workload.programs() if hasattr(workload, "programs") else []
        if not programs:
            raise ValueError(f"{type(workload).__name__} gives no programs to count")
        total = 0.0
        for fn, args, times in programs:
            total += times * jaxpr_flops(jax.make_jaxpr(fn)(*args).jaxpr)
        return total, FLOP_METHOD

    def configure_jax(self, device: str, threads: int) -> dict[str, Any]:
        # XLA has no intra-op thread setting for its CPU pool; pinning the worker to
        # `threads` cores bounds what it can use (and is recorded as such).
        cores = sorted(os.sched_getaffinity(0))
        if device == "cpu" and threads < len(cores):
            os.sched_setaffinity(0, cores[:threads])
        if device == "cpu":
            os.environ["JAX_PLATFORMS"] = "cpu"
        # Like TensorFlow's memory growth: JAX would otherwise take 75% of the GPU at start,
        # and its memory figures would compare with nothing.
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        # XLA's default on GPUs runs float32 matmuls and convolutions as TF32: fp32 must be
        # fp32 (METHODOLOGY rule 8), as it is in the other frameworks.
        jax.config.update("jax_default_matmul_precision", "highest")  # type: ignore[no-untyped-call]
        return {
            "intra_op_threads": f"XLA thread pool on {len(os.sched_getaffinity(0))} cores",
            "jax_platform": jax.default_backend(),
            "jax_default_matmul_precision": "highest",
            "xla_preallocate": os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"],
        }

    def compile_cache(self, directory: str, case: Case) -> dict[str, Any]:
        import jax

        # Every program, however quick to compile (the defaults skip those under 1 s),
        # and XLA's GPU autotuning results with them.
        jax.config.update("jax_compilation_cache_dir", os.path.join(directory, "jax"))  # type: ignore[no-untyped-call]
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # type: ignore[no-untyped-call]
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)  # type: ignore[no-untyped-call]
        # JAX says each lookup as a monitoring event: counted for the result.
        self.cache_events: dict[str, int] = {}

        def count(event: str, **_: Any) -> None:
            if event.startswith("/jax/compilation_cache/cache_"):
                self.cache_events[event] = self.cache_events.get(event, 0) + 1

        jax.monitoring.register_event_listener(count)
        return {"compile_cache": f"XLA executables, in {directory}"}

    def compile_cache_state(self) -> dict[str, Any]:
        events = getattr(self, "cache_events", None)
        if events is None:
            return {}
        return {
            "compile_cache_hits": events.get("/jax/compilation_cache/cache_hits", 0),
            "compile_cache_misses": events.get("/jax/compilation_cache/cache_misses", 0),
        }

    def unavailable_reason(self, device: str) -> str | None:
        import jax

        if device == "cuda" and not [d for d in jax.devices() if d.platform == "gpu"]:
            return "JAX sees no GPU on this machine"
        return None

    def jax_environment(self, device: str) -> dict[str, Any]:
        from importlib.metadata import version

        import jax

        env: dict[str, Any] = {"jax": jax.__version__, "jaxlib": version("jaxlib")}
        if device == "cuda":
            gpus = [d for d in jax.devices() if d.platform == "gpu"]
            if gpus:
                env["device_name"] = gpus[0].device_kind
        return env

    def is_oom(self, exc: BaseException) -> bool:
        return "RESOURCE_EXHAUSTED" in str(exc) or "Out of memory" in str(exc)

    def is_unsupported(self, exc: BaseException) -> bool:
        return str(exc).startswith("UNIMPLEMENTED")

    def reset_device_memory(self, device: str) -> None:
        return None  # JAX's peak cannot be reset

    def device_memory(self, device: str) -> dict[str, int] | None:
        """JAX's allocator peak is the process's (the build, the compilation and its
        autotuning's scratch, warmup), not the steady state's as PyTorch's and
        TensorFlow's are after their reset: it is recorded under its own name, with
        what is held at the end, and never compared with theirs."""
        if device != "cuda":
            return None
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        found = {
            name: int(stats[key])
            for name, key in (
                ("process_peak_bytes", "peak_bytes_in_use"),
                ("in_use_bytes", "bytes_in_use"),
            )
            if stats.get(key) is not None
        }
        return found or None

    def profile(
        self, workload: Any, steps: int, trace_path: str | None
    ) -> tuple[str, list[Event], Window, str | None]:
        """`steps` of `workload`'s steps under JAX's profiler, then its sync, read back
        from the XSpace it writes: the XLA ops it ran (the GPU's, or the CPU client's on
        its threads), each categorised by the text of the compiled program it ran in,
        where the workload gives them (`compiled_texts()`: a jitted train or infer step
        of Flax or Keras, a generation's prefill and decoding step; what a fusion holds,
        the Python functions that made it: fwbench.explain.hlo), else by its program's
        and its own name (eager ops); a
        generation's prefill and decoding steps in their phases' ranges
        (generation.phases_marked), as the other adapters mark them."""
        import contextlib
        import glob
        import tempfile

        import jax
        from jax.profiler import ProfileData

        from fwbench.frameworks import generation

        # A trace nobody asked to keep is read, then removed with its directory.
        with contextlib.ExitStack() as stack:
            logdir = trace_path or stack.enter_context(
                tempfile.TemporaryDirectory(prefix="fwbench-jax-trace-")
            )
            with (
                jax.profiler.trace(logdir),
                generation.phases_marked(workload, jax.profiler.TraceAnnotation),
                jax.profiler.TraceAnnotation(WINDOW),
            ):
                for _ in range(steps):
                    workload.step()
                workload.sync()
            files = sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))
            data = ProfileData.from_file(files[-1])
        texts_of = getattr(workload, "compiled_texts", None)
        programs: list[str] = texts_of() if texts_of is not None else []
        # An instruction's name is its program's own (a prefill and a decoding step each
        # have their `ynn_fusion`): looked up under the program the profile names.
        texts = {
            (module_name(program), op): text
            for program in programs
            for op, text in op_texts(program, self.libraries).items()
        }
        # One program: its ops by name alone too, should a profile name it otherwise.
        alone = {op: text for (_, op), text in texts.items()} if len(programs) == 1 else {}
        events: list[Event] = []
        span = (0.0, 0.0)
        phases: dict[str, list[tuple[float, float]]] = {}
        for plane in data.planes:
            gpu_plane = plane.name.startswith("/device:GPU")
            if plane.name != "/host:CPU" and not gpu_plane:
                continue
            for index, line in enumerate(plane.lines):
                for ev in line.events:
                    start = ev.start_ns * 1e-9
                    end = start + ev.duration_ns * 1e-9
                    if not gpu_plane and ev.name == WINDOW:
                        span = (start, end)
                        continue
                    if not gpu_plane and ev.name in PHASES:
                        phases.setdefault(PHASES[ev.name], []).append((start, end))
                        continue
                    if gpu_plane != workload.on_gpu:
                        continue  # the ops of the device the workload ran on
                    stats = dict(ev.stats)
                    op = stats.get("hlo_op")
                    if not op:
                        continue  # the runtime's own events: its time is overhead
                    module = str(stats.get("hlo_module", ""))
                    text = texts.get((module, str(op))) or alone.get(str(op)) or f"{module} | {op}"
                    thread = f"{plane.name}:{line.name}:{index}"
                    # Named without its instance number (`convolution.3`): the top
                    # operations add up every convolution, as PyTorch's `aten::` ops do.
                    name = re.sub(r"\.\d+$", "", str(op))
                    events.append(Event(thread, start, end, name, text))
        return "jax.profiler (XPlane)", events, Window(*span, phases), trace_path
