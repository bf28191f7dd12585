"""The Trainer's checkpoints, a mixin of Trainer: save (rank 0 writes; the extra holds the step,
the loader's position, the loss scaler, the exact sum's grid exponents and the default
generator), resume (rank 0 reads, the bytes broadcast to the others) and rank 0's parameters,
buffers and generator broadcast when fit() starts."""
# mypy: disable-error-code="attr-defined"
# (a mixin reads the attributes that Trainer.__init__ sets, in _loop.py, and the methods of
# the other rooms, which mypy does not see on the mixin alone)
from __future__ import annotations

import os
from typing import Any, Optional

from .. import checkpoint, distributed, random


class TrainerCheckpoints:
    """Mixed into Trainer: save, resume and the state they carry."""

    optimizer: Any  # declared for mypy; Trainer.__init__ sets it

    def _extra(self) -> dict:
        extra = {"train.step": self.step, "rng.default": random.get_rng_state()}
        if hasattr(self.loader, "state_dict"):
            extra.update({f"data.{k}": v for k, v in self.loader.state_dict().items()})
        if self.scaler is not None:
            extra.update({f"amp.{k}": v for k, v in self.scaler.state_dict().items()})
        if self.micro_batches > 1:
            priors = self._sum.exponents if self._sum is not None else self._priors_or_zero()
            extra.update({f"grad.exp.{k}": int(e) for k, e in enumerate(priors)})
        return extra

    def _priors_or_zero(self) -> list[int]:
        return list(getattr(self, "_priors", None) or [0] * len(self.optimizer.params))

    def save(self, evaluation: Optional[dict] = None) -> Optional[str]:
        """Writes a checkpoint of the current step (rank 0 only), a candidate for the best when
        `evaluation` (from evaluate()) is given; returns its path."""
        if self.manager is None:
            raise ValueError("Trainer.save: no checkpoints=Checkpoints(dir)")
        self._saved_step = self.step
        self._call("on_checkpoint")  # the run log's rows as durable as the checkpoint
        if self.shards is not None:  # every worker takes part; rank 0 writes it all
            self.shards.gather_state()
        try:
            if self.rank != 0:
                return None
            metric, higher = self._best_of(evaluation) if evaluation else (None, True)
            return self.manager.save(self.step, self.model, self.optimizer, self._extra(),
                                     metric=metric, higher_is_better=higher)
        finally:
            if self.shards is not None:
                self.shards.release()

    def resume(self, path: Optional[str] = None) -> bool:
        """Restores the newest intact checkpoint of the checkpoint folder, or of `path` when it
        is a folder, or the checkpoint file `path`: model, optimizer, step, loader position,
        loss scale and the default generator. A corrupt newer checkpoint is skipped with a
        warning naming it (CheckpointManager.restore_newest). Returns False when there is
        none."""
        if self.world > 1 and self.shards is not None:  # the whole state loaded, this share kept
            self.shards.materialise()
        try:
            extra = self._load_newest(path)
        finally:
            if self.world > 1 and self.shards is not None:
                self.shards.release()
        if extra is None:
            return False
        self._release_batches()

        def part(prefix: str) -> dict:
            return {k[len(prefix):]: v for k, v in extra.items() if k.startswith(prefix)}

        if hasattr(self.loader, "load_state_dict"):
            self.loader.load_state_dict(part("data."))
        if self.scaler is not None:
            self.scaler.load_state_dict(part("amp."))
        if "rng.default" in extra:
            random.set_rng_state(extra["rng.default"])
        self._priors = [int(extra[f"grad.exp.{k}"]) for k in range(len(self.optimizer.params))
                        if f"grad.exp.{k}" in extra] or None
        if self._priors is not None and len(self._priors) != len(self.optimizer.params):
            self._priors = None
        if self._sum is not None:
            self._sum.exponents = self._priors_or_zero()
        self.step = int(extra.get("train.step", self.optimizer.step_count))
        self._saved_step = self.step
        if self.log is not None:
            self.log.truncate_after(self.step)
        return True

    def _load_newest(self, path: Optional[str]) -> Optional[dict]:
        """Rank 0 finds the checkpoint and loads it; under W workers its bytes are broadcast
        and loaded by the others. The extra integers, or None when there is none."""
        def load_file(found: str) -> tuple[Optional[bytes], dict]:
            if self.world == 1:
                return None, checkpoint.load(found, self.model, self.optimizer)
            with open(found, "rb") as f:
                data = f.read()
            return data, checkpoint.from_bytes(data, self.model, self.optimizer)

        loaded: Optional[tuple[Optional[bytes], dict]] = None
        if self.rank == 0:
            if path is not None and not os.path.isdir(path):
                loaded = load_file(path)
            else:
                if path is not None:
                    manager = checkpoint.CheckpointManager(path)
                elif self.manager is None:
                    raise ValueError("Trainer.resume: no checkpoints=Checkpoints(dir) and no path")
                else:  # its own folder: a best.ckpt update that a kill interrupted, finished
                    manager = self.manager
                    manager.recover()
                found = manager.restore_newest(load_file)
                loaded = None if found is None else found[1]
        if self.world == 1:
            return None if loaded is None else loaded[1]
        data = distributed.broadcast_bytes(None if loaded is None else loaded[0],
                                           "reading the checkpoint to resume from")
        if data is None:
            return None
        return loaded[1] if loaded is not None else checkpoint.from_bytes(data, self.model,
                                                                          self.optimizer)

    def _broadcast_state(self) -> None:
        """Rank 0's parameters, buffers and default generator on every rank (DDP's start)."""
        arrays = [p._data for p in self.optimizer.params] + [b._data for b in self._buffers()]
        distributed.broadcast_arrays(arrays, "broadcasting the parameters")
        random.set_rng_state(distributed.broadcast_int(random.get_rng_state(),
                                                       "broadcasting the generator"))
