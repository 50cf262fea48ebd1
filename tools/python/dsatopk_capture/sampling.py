"""Which calls a hook keeps, and which rows of a kept call.

The decision is made on the caller's thread before anything is copied, from what the call
carries (its layer and step metadata) and from counters, so it costs microseconds and a skipped
call copies nothing.
"""

import math
import random


def _int_set(name, values):
    if values is None:
        return None
    try:
        chosen = frozenset(int(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: a collection of integers expected, got {values!r}") from None
    if not chosen:
        raise ValueError(f"{name}: empty: no call would be kept")
    return chosen


def _step_range(steps):
    """steps as (first, last) inclusive, a range, or a collection of integers."""
    if steps is None:
        return None
    if isinstance(steps, range):
        return steps
    if isinstance(steps, tuple) and len(steps) == 2 and \
            all(isinstance(v, int) or v is None for v in steps):
        first, last = steps
        first = 0 if first is None else first
        if last is not None and last < first:
            raise ValueError(f"steps: ({first}, {last}) is empty")
        return (first, last)
    return _int_set("steps", steps)


class Sampler:
    """every: keep every Nth eligible call (the first, the N+1th, ...); layers: keep only calls
    whose `layer` is in this set; steps: keep only calls whose `step` is in (first, last)
    inclusive (last None: no end), a range, or a set; probability: keep each remaining call with
    this probability, drawn from random.Random(seed) (the same calls on every run of the same
    call sequence). A call is eligible when it passes the layer and step filters; `every` counts
    eligible calls only, so every=10 with layers={3} keeps every tenth call of layer 3."""

    def __init__(self, every=1, layers=None, steps=None, probability=1.0, seed=0):
        self.every = int(every)
        if self.every < 1:
            raise ValueError(f"every: {every}: at least 1 (1 keeps every call)")
        self.layers = _int_set("layers", layers)
        self.steps = _step_range(steps)
        self.probability = float(probability)
        if not 0.0 < self.probability <= 1.0:
            raise ValueError(f"probability: {probability}: in (0, 1]")
        self.seed = seed
        self._random = random.Random(seed)
        self.eligible = 0

    def reset(self):
        self._random = random.Random(self.seed)
        self.eligible = 0

    def _step_matches(self, step):
        if isinstance(self.steps, tuple):
            first, last = self.steps
            return step >= first and (last is None or step <= last)
        return step in self.steps

    def keep(self, metadata):
        """Whether to keep a call with this metadata. Raises ValueError when a layer or step
        filter is set and the call does not say its layer or step."""
        if self.layers is not None:
            layer = metadata.get("layer")
            if layer is None:
                raise ValueError("the hook keeps only layers " + str(sorted(self.layers)) +
                                 " but this call has no layer= (pass layer=N, or set it with "
                                 "hook.context(layer=N))")
            if int(layer) not in self.layers:
                return False
        if self.steps is not None:
            step = metadata.get("step")
            if step is None:
                raise ValueError("the hook keeps only some steps but this call has no step= "
                                 "(pass step=N, or set it with hook.context(step=N))")
            if not self._step_matches(int(step)):
                return False
        eligible = self.eligible
        self.eligible += 1
        if eligible % self.every:
            return False
        if self.probability < 1.0:
            return self._random.random() < self.probability
        return True

    def describe(self):
        """The sampling settings, as kept in stats()."""
        steps = self.steps
        if isinstance(steps, range):
            steps = [steps.start, steps.stop - 1] if steps.step == 1 else list(steps)
        elif isinstance(steps, tuple):
            steps = list(steps)
        elif steps is not None:
            steps = sorted(steps)
        return {"every": self.every, "layers": sorted(self.layers) if self.layers else None,
                "steps": steps, "probability": self.probability, "seed": self.seed}


def kept_rows(rows, max_rows):
    """The step between kept rows when a call of `rows` rows is capped at max_rows: rows
    0, step, 2*step, ... spread over the whole batch (so every request of a batch has a chance),
    at most max_rows of them. 1 when no cap applies."""
    if max_rows is None or rows <= max_rows:
        return 1
    return math.ceil(rows / max_rows)
