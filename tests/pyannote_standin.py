"""A pipeline folder laid out like pyannote/speaker-diarization-community-1, built from pyannote's own classes
with random weights: the real loading and inference code runs on it, offline, in seconds.

community-1's repository holds ``config.yaml`` (the pipeline class and its parameters, with ``$model/...``
sub-folder references) and ``segmentation/pytorch_model.bin`` (PyanNet, powerset over 3 speakers),
``embedding/pytorch_model.bin`` (WeSpeaker ResNet34) and ``plda/{xvec_transform,plda}.npz`` (VBx clustering).
The checkpoints are saved the way pyannote's ``Model.from_pretrained`` reads them: a Lightning checkpoint
with the state dict, the constructor's hyper-parameters and pyannote's own section (version, class, task
specifications) that ``Model.on_save_checkpoint`` writes.
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG = """\
dependencies:
  pyannote.audio: 4.0.0
pipeline:
  name: pyannote.audio.pipelines.SpeakerDiarization
  params:
    clustering: VBxClustering
    embedding: $model/embedding
    embedding_batch_size: 32
    embedding_exclude_overlap: true
    plda: $model/plda
    segmentation: $model/segmentation
    segmentation_batch_size: 32
params:
  clustering:
    threshold: 0.6
    Fa: 0.07
    Fb: 0.8
  segmentation:
    min_duration_off: 0.0
"""


def _save(model: object, folder: Path) -> None:
    import lightning
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    checkpoint: dict[str, object] = {
        "state_dict": model.state_dict(),  # type: ignore[attr-defined]
        "hyper_parameters": dict(model.hparams),  # type: ignore[attr-defined]
        "pytorch-lightning_version": lightning.__version__,
    }
    model.on_save_checkpoint(checkpoint)  # type: ignore[attr-defined]
    torch.save(checkpoint, folder / "pytorch_model.bin")


def build_pipeline(folder: Path, seed: int = 0) -> Path:
    os.environ["PYANNOTE_METRICS_ENABLED"] = "0"
    import numpy as np
    import torch
    from pyannote.audio.core.task import Problem, Resolution, Specifications
    from pyannote.audio.models.embedding import WeSpeakerResNet34
    from pyannote.audio.models.segmentation import PyanNet

    torch.manual_seed(seed)
    segmentation = PyanNet(
        sincnet={"stride": 10},
        lstm={"hidden_size": 32, "num_layers": 1},
        linear={"hidden_size": 32, "num_layers": 1},
    )
    segmentation.specifications = Specifications(
        problem=Problem.MONO_LABEL_CLASSIFICATION,
        resolution=Resolution.FRAME,
        duration=10.0,
        min_duration=10.0,
        warm_up=(0.0, 0.0),
        classes=["speaker#1", "speaker#2", "speaker#3"],
        powerset_max_classes=2,
        permutation_invariant=True,
    )
    segmentation.build()
    _save(segmentation, folder / "segmentation")

    embedding = WeSpeakerResNet34()
    embedding.specifications = Specifications(problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=3.0)
    _save(embedding, folder / "embedding")

    dimension, lda = embedding.dimension, 16
    rng = np.random.default_rng(seed)
    (folder / "plda").mkdir(parents=True, exist_ok=True)
    np.savez(
        folder / "plda" / "xvec_transform.npz",
        mean1=rng.normal(size=dimension),
        mean2=rng.normal(size=lda),
        lda=rng.normal(size=(dimension, lda)),
    )
    np.savez(
        folder / "plda" / "plda.npz",
        mu=rng.normal(size=lda),
        tr=np.eye(lda) + 0.1 * rng.normal(size=(lda, lda)),
        psi=np.abs(rng.normal(size=lda)) + 0.5,
    )
    (folder / "config.yaml").write_text(CONFIG)
    (folder / "README.md").write_text("stand-in for pyannote/speaker-diarization-community-1 (random weights)\n")
    return folder


def folder_files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}
