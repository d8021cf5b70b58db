"""The one place a loaded model's forward pass is watched or changed: hooks on its residual stream.

Layers are numbered as in :class:`evaluator.core.models.LoadedModel`: layer ``0`` is the output of
``lm.embeddings``, layer ``L`` (1..n_layers) the raw output of ``lm.blocks[L - 1]`` (no final
norm). Each context manager registers its hooks on entry and removes them on exit, whatever
happened inside. None of them takes ``lm.lock``: the caller holds it around the hooks and the
passes they watch (the hooks sit on modules every thread shares).

- :func:`capture`: each asked layer's output as a pass reaches it, kept or handed to a callback;
  with ``stop=True`` the pass ends at the deepest of them and the later blocks never run.
- :func:`edit`: one layer's output replaced by ``fn(output)`` (steering a full pass).
- :func:`block_calls`: the arguments each block after a layer is called with (masks, position
  embeddings), to replay those blocks later on an edited stream.

Harvesting, the attack, the steering readout and steered generation all go through here; no other
evaluator module registers a hook (``tests/evaluator/test_hooks.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from evaluator.errors import EvaluatorError

if TYPE_CHECKING:  # pragma: no cover
    from evaluator.core.models import LoadedModel

#: an edit of the residual stream: "b t d" hidden states → the edited hidden states
Edit = Callable[[Any], Any]


def module_at(lm: LoadedModel, layer: int) -> Any:
    """The module whose output is ``layer`` (an out-of-range layer is refused with the range)."""
    if not 0 <= layer <= lm.n_layers:
        raise EvaluatorError(f"layer {layer} out of range for {lm.id}: 0..{lm.n_layers}")
    return lm.embeddings if layer == 0 else lm.blocks[layer - 1]


def hidden_of(output: Any) -> Any:
    """The hidden states of a module's output (a block returns a tuple whose first item they are)."""
    return output[0] if isinstance(output, tuple) else output


class _Stop(Exception):
    """Raised at the deepest captured layer when the pass is to stop there."""


@contextmanager
def capture(
    lm: LoadedModel,
    layers: Sequence[int],
    *,
    consume: Callable[[int, Any], None] | None = None,
    stop: bool = False,
) -> Iterator[dict[int, Any]]:
    """Yield {layer: "b t d" output} filled as the passes run inside the block.

    ``consume(layer, hidden)``: called as each layer is reached, instead of keeping its tensor (the
    dict then stays empty). ``stop``: the pass ends right after the deepest layer asked for; the
    block is left there (the rest of it is skipped), so it holds one pass.
    """
    wanted = sorted(set(layers))
    modules = [module_at(lm, layer) for layer in wanted]
    deepest = wanted[-1] if stop and wanted else None
    signal = _Stop()
    captured: dict[int, Any] = {}

    def hook_for(layer: int):
        def hook(module, args, output):  # noqa: ARG001 - the hook signature
            if consume is None:
                captured[layer] = hidden_of(output)
            else:
                consume(layer, hidden_of(output))
            if layer == deepest:
                raise signal

        return hook

    handles = [
        module.register_forward_hook(hook_for(layer)) for layer, module in zip(wanted, modules, strict=True)
    ]
    try:
        yield captured
    except _Stop as exc:
        if exc is not signal:  # another capture's stop: not ours to swallow
            raise
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def edit(lm: LoadedModel, layer: int, fn: Edit | None) -> Iterator[None]:
    """Inside the block, ``layer``'s output is replaced by ``fn(output)`` at every position of every
    pass (the other items of a block's output tuple kept). ``fn`` None: nothing is changed."""
    module = module_at(lm, layer)
    if fn is None:
        yield
        return

    def hook(mod, args, output):  # noqa: ARG001 - the hook signature
        if isinstance(output, tuple):
            return (fn(output[0]), *output[1:])
        return fn(output)

    handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def block_calls(lm: LoadedModel, layer: int, record: Callable[[tuple, dict], None]) -> Iterator[None]:
    """Inside the block, each call of a block after ``layer`` (``lm.blocks[layer:]``) is passed to
    ``record(args, kwargs)``: its positional arguments after the hidden states, and its keyword
    arguments, in the order the blocks run."""
    module_at(lm, layer)

    def hook(mod, args, kwargs):  # noqa: ARG001 - the hook signature
        record(tuple(args[1:]), dict(kwargs))

    handles = [block.register_forward_pre_hook(hook, with_kwargs=True) for block in lm.blocks[layer:]]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
