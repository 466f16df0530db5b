"""The eight experiments of the paper at lab scale, in the order `mrc repro all` runs them."""

from __future__ import annotations

from typing import Any

from mrc_transport.repro.experiments import (
    blackhole,
    cascade,
    flapping,
    incast,
    loss,
    permutation,
    port_loss,
    training_step,
)
from mrc_transport.repro.spec import Experiment

EXPERIMENTS: dict[str, Experiment[Any]] = {
    e.name: e
    for e in (
        loss.EXPERIMENT,
        permutation.EXPERIMENT,
        incast.EXPERIMENT,
        port_loss.EXPERIMENT,
        flapping.EXPERIMENT,
        cascade.EXPERIMENT,
        blackhole.EXPERIMENT,
        training_step.EXPERIMENT,
    )
}
NAMES = tuple(EXPERIMENTS)
